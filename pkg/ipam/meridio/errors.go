package meridio

import "fmt"

// Expected says what a datasource must be; it ends the messages of the
// errors below.
const Expected = "expected a Causeway IPAM store (bbolt) or a Meridio IPAM database " +
	"(SQLite with a table prefixes: id, name, cidr, parent_id, updated_at, expirable)"

// ForeignError says that a file is a SQLite database but not Meridio's IPAM
// layout (another application's database). Nothing was read into a store.
type ForeignError struct {
	Path  string
	Found string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("%s is not a Meridio IPAM database: found %s; %s", e.Path, e.Found, Expected)
}

// DamagedError says that a file starts as a SQLite database but cannot be
// read whole (truncated, malformed pages). Nothing was read into a store.
type DamagedError struct {
	Path    string
	Problem string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("Meridio IPAM database %s is damaged: found a SQLite file that cannot be read (%s); %s",
		e.Path, e.Problem, Expected)
}
