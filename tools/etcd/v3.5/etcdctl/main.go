// Command etcdctl is etcd's client CLI, built from the module version pinned in ../go.mod. As
// upstream's main: ETCDCTL_API selects v3 (the default) or the deprecated v2 commands.
package main

import (
	"fmt"
	"os"

	"go.etcd.io/etcd/etcdctl/v3/ctlv2"
	"go.etcd.io/etcd/etcdctl/v3/ctlv3"
)

func main() {
	api := os.Getenv("ETCDCTL_API")
	// Unset so that the flag parsing that follows does not read it as ETCDCTL_API's own flag.
	os.Unsetenv("ETCDCTL_API")
	switch api {
	case "", "3":
		ctlv3.MustStart()
	case "2":
		ctlv2.MustStart()
	default:
		fmt.Fprintf(os.Stderr, "unsupported API version: %v\n", api)
		os.Exit(1)
	}
}
