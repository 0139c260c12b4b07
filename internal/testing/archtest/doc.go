// Package archtest holds TestArrows, which checks the import rules of
// ARCHITECTURE.md ("Arrows that must never exist") on the module's non-test
// packages, and TestPortability, which checks which packages build on
// macOS and FreeBSD (ARCHITECTURE.md and README, "Portability"). It has no
// code of its own.
package archtest
