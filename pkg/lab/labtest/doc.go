// Package labtest is the test bed that the lab's packages share in their
// tests: a control plane with the namespaces of a stub and of the proxy's
// side (Bed), a stub run as its own process from a copy of the test binary
// (StartChild, RunChild) and the TestMain of a package that runs the NSM SDK
// (Main). Only tests import it.
package labtest
