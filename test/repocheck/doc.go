// Package repocheck holds the tests of the repository's own rules, read
// from its files without privileges: internal/ holds ground-floor helpers
// that import nothing of pkg/ or cmd/ (layout_test.go), and what README.md
// and docs/*.md cite (tests, repository paths, make targets) exists
// (docs_test.go).
package repocheck
