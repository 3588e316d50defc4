// Command ipam is Causeway's IPAM service: ipam.v1.Ipam over gRPC, backed by
// the pkg/ipam engine and a bbolt database, following the conduits of the
// configuration server when one is configured. Configuration comes from
// IPAM_* environment variables (see the README); the work is done by
// pkg/ipamd. "ipam restore" puts a store snapshot back (docs/ipam-store.md);
// "ipam import" reads a Meridio IPAM database (docs/moving-from-meridio.md),
// which the service also imports on start when it finds one at
// IPAM_DATASOURCE; "ipam migrate" copies the bbolt store into the
// Kubernetes store, "ipam export" copies it back to a bbolt file and "ipam
// delete-records" removes a trench's records from it (docs/ipam-store.md). Exit status: 0 clean stop, 1 failure, 2 configuration
// error, 3 damaged store (ipamd.ExitStoreDamaged), 4 a SQLite file that is
// not Meridio's IPAM (ipamd.ExitStoreForeign).
package main

import (
	"os"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/pkg/ipamd"
)

var version = "dev"

func main() {
	os.Exit(daemon.Main(daemon.Service[*ipamd.Config]{
		Name:     "ipam",
		Version:  version,
		Env:      "IPAM_*",
		Load:     ipamd.Load,
		LogLevel: func(c *ipamd.Config) string { return c.LogLevel },
		Run:      ipamd.Run,
		Commands: []daemon.Command{
			{Name: "restore", Usage: "put a store snapshot back (docs/ipam-store.md)", Run: ipamd.Restore},
			{Name: "import", Usage: "read a Meridio IPAM database into the store (docs/moving-from-meridio.md)", Run: ipamd.Import},
			{Name: "migrate", Usage: "copy the bbolt store into the Kubernetes store (docs/ipam-store.md)", Run: ipamd.Migrate},
			{Name: "export", Usage: "copy the Kubernetes store into a new bbolt file: back to one replica (docs/ipam-store.md)", Run: ipamd.Export},
			{Name: "delete-records", Usage: "remove a trench's records and Lease from the Kubernetes store (docs/ipam-store.md)", Run: ipamd.DeleteRecords},
		},
	}, os.Args[1:], os.Stdout, os.Stderr))
}
