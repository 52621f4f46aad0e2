// Package layers holds the test that enforces the import rules of the README's
// Layout section (layers_test.go); it has no code of its own.
package layers
