// Node preload for scripts/generate_imports.py: makes `cdk8s import k8s@X` read the Kubernetes
// schema from a local file (DRA_K8S_SCHEMA_FILE) instead of GitHub, so imports generate offline.
// cdk8s-cli hard-codes the schema URL (cdk8s-team/cdk8s#2141); this replaces the exported
// `download` of its lib/util.js for schema URLs only. Pinned to the cdk8s-cli version in the script.
'use strict';
const fs = require('fs');
const path = require('path');

const cliScript = fs.realpathSync(process.argv[1]);
const util = require(path.join(path.dirname(cliScript), '..', 'lib', 'util.js'));
const original = util.download;
util.download = async function download(url) {
  if (/kubernetes-schemas\/v[^/]+\/_definitions\.json$/.test(url)) {
    return fs.readFileSync(process.env.DRA_K8S_SCHEMA_FILE, 'utf-8');
  }
  return original(url);
};
