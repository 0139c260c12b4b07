// Package threadns tells whether the calling OS thread was moved into
// another network namespace than the one the process started in (setns on
// a locked thread, as embedders, the demo and the tests do), so that work
// later done on other threads can be pointed at the caller's namespace.
//
// Linux only (network namespaces): on other systems the package holds this
// documentation alone, so that `go build ./...` passes there (README,
// "Portability").
package threadns
