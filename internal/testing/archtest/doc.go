// Package archtest holds TestArrows, which checks the import rules of
// ARCHITECTURE.md ("Arrows that must never exist") on the module's non-test
// packages. It has no code of its own.
package archtest
