// Package textsafe makes text from hosts gitfleet does not control safe to
// print on an operator's terminal (architecture §11): a registry's error, a
// repository path or a runner's report may carry escape sequences that
// move the cursor, rewrite earlier lines, set the window title or hide text.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package textsafe
