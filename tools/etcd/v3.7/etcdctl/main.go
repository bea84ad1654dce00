// Command etcdctl is etcd's client CLI (API v3), built from the module version pinned in ../go.mod.
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() {
	ctlv3.MustStart()
}
