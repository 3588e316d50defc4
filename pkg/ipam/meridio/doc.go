// Package meridio reads the IPAM database of Meridio (a SQLite file with one
// table, prefixes: trench roots, conduits, nodes and children linked by
// parent_id) into the records of Causeway's store (pkg/ipam/store). It owns
// recognising such a file (Sniff), checking that it is Meridio's layout and
// readable, and turning every usable row into a store.Record; rows that the
// engine could not serve are skipped and reported. It writes nothing: putting
// the records into a store is the caller's (pkg/ipamd with store/bolt). The
// SQLite reader is modernc.org/sqlite, pure Go, so the binaries stay static.
package meridio
