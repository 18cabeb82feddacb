// Command kcp is a multi-call binary holding one Kubernetes control plane for the tests:
//
//	kcp etcd [etcd flags]
//	kcp apiserver [kube-apiserver flags]
//	kcp scheduler [kube-scheduler flags]
//	kcp controller-manager [kube-controller-manager flags]
//
// Each subcommand runs upstream's own entry point (etcdmain, and the cobra commands the
// cmd/kube-* mains build), so the flags and behaviour are those of the released binaries.
// One binary per Kubernetes version lets the packages the components share compile once.
package main

import (
	"fmt"
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kcp etcd|apiserver|scheduler|controller-manager [flags]")
		os.Exit(2)
	}
	sub, rest := os.Args[1], os.Args[2:]
	switch sub {
	case "etcd":
		etcdmain.Main(append([]string{"etcd"}, rest...))
	case "apiserver":
		cmd := apiserver.NewAPIServerCommand()
		cmd.SetArgs(rest)
		os.Exit(cli.Run(cmd))
	case "scheduler":
		cmd := scheduler.NewSchedulerCommand()
		cmd.SetArgs(rest)
		os.Exit(cli.Run(cmd))
	case "controller-manager":
		cmd := controllermanager.NewControllerManagerCommand()
		cmd.SetArgs(rest)
		os.Exit(cli.Run(cmd))
	default:
		fmt.Fprintf(os.Stderr, "kcp: unknown component %q\n", sub)
		os.Exit(2)
	}
}
