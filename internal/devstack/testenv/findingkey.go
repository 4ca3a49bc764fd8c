package testenv

import "gitfleet/internal/infra/config"

// FindingKey is the findings' key of the tests' workers, given to them
// as production workers are given theirs: never kept in the database,
// which the tests check holds no trace of it.
var FindingKey = config.FindingKey{Version: 1, Secret: []byte("gitfleet-test-finding-key:3f9c1e7a5b20d84c")}
