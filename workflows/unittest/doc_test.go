// Package unittest holds the workflows' unit tests: the Temporal SDK's test
// suite with mocked activities, and the replay of recorded histories. They
// need neither a Temporal server nor PostgreSQL, so they live apart from
// package workflows' tests, whose TestMain starts the whole stack; `make
// unit` runs them.
package unittest
