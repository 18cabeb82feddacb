module kcp

go 1.26.0
