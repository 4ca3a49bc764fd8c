# gitfleet — the commands a newcomer needs are `make run` and `make test`.

GO       ?= go
GOBIN    := $(shell $(GO) env GOPATH)/bin
# The Temporal CLI is pinned: later releases carry a replace directive that
# `go install` refuses.
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL := $(GOBIN)/temporal
export TEMPORAL_CLI ?= $(TEMPORAL)

.PHONY: all build build-dev run test unit bench lint gitleaks temporal-cli compose-check docs-check clean

all: build

## build: compile the production binaries bin/worker and bin/starter
build:
	@echo "Building bin/worker and bin/starter: the first build compiles every dependency (a few minutes"
	@echo "on a fresh machine, with no output meanwhile); later builds take seconds"
	$(GO) build -o bin/ ./worker ./starter

## build-dev: bin/starter-dev, the starter with `starter dev` (the dev stack:
## Temporal dev server, private PostgreSQL, demo forge) built in
build-dev:
	@echo "Building bin/starter-dev (the dev stack: Temporal dev server, PostgreSQL, demo forge and registry)"
	$(GO) build -tags devstack -o bin/starter-dev ./starter

## temporal-cli: install the pinned Temporal CLI (dev server + Web UI) if missing
temporal-cli: $(TEMPORAL)
$(TEMPORAL):
	@echo "Installing the Temporal CLI $(TEMPORAL_CLI_VERSION) (takes a few minutes, once): go install builds"
	@echo "the Temporal dev server and its Web UI from source, and prints nothing until it is done"
	$(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)
	@echo "Installed $(TEMPORAL); to run it as 'temporal', put $(GOBIN) (\$$(go env GOPATH)/bin) on PATH:"
	@echo '  export PATH="$$PATH:$(GOBIN)"'

## run: the whole stack on this machine, with a demo collection; Ctrl-C stops it
run: build build-dev temporal-cli
	bin/starter-dev dev

## test: vet and every test, integration tests against real parts included
test: temporal-cli gitleaks lint
	$(GO) vet ./...
	$(GO) vet -tags devstack ./starter/
	$(GO) test -timeout 30m ./...

## unit: every package whose tests run alone (no Temporal dev server, no
## PostgreSQL): those whose test binary links none of the stack's launchers
## (testenv, pgcluster, temporalcli). `make -n unit` lists them.
UNIT_STACK := ^gitfleet/internal/devstack/(testenv|pgcluster|temporalcli)$$
UNIT_PACKAGES = $(shell $(GO) list -e -test -f '{{with .ForTest}}{{.}} {{$$.ImportPath}} {{join $$.Deps " "}}{{end}}' ./... | \
	awk '{ seen[$$1] = 1; for (i = 2; i <= NF; i++) if ($$i ~ "$(UNIT_STACK)") stack[$$1] = 1 } \
		END { for (p in seen) if (!stack[p]) print p }' | sort)
unit: gitleaks
	$(GO) test $(UNIT_PACKAGES)

## bench: benchmarks against the real stack; they print their figures.
## One package at a time: a benchmark has the machine to itself.
## The scan is measured on real code first (GOROOT/src over 25,000 commits,
## 0.6 GB, generated once into ~/.cache/gitfleet/repogen in about 40 s), then
## on a generated repository; GITFLEET_BENCH_REPO=/path/to/repo measures it on
## any local repository instead.
bench: temporal-cli gitleaks
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 1x -timeout 120m ./...

## gitleaks: the scanner the parity test and the benchmarks compare against
gitleaks:
	@command -v gitleaks >/dev/null || test -x $(GOBIN)/gitleaks || { \
		echo "Installing gitleaks v8.30.1 (a minute or two, once)"; \
		$(GO) install github.com/zricethezav/gitleaks/v8@v8.30.1; }

## lint: golangci-lint, pinned, with the linters .golangci.yml names and why
GOLANGCI_LINT_VERSION := v2.6.2
GOLANGCI_LINT := $(GOBIN)/golangci-lint
lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...
	$(GOLANGCI_LINT) run --build-tags devstack ./starter/

$(GOLANGCI_LINT):
	@echo "Installing golangci-lint $(GOLANGCI_LINT_VERSION) (a few minutes, once)"
	$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

## compose-check: validate docker-compose.yml with docker compose (skipped, saying so, without Docker)
# Placeholders stand in for the required secrets the shell does not set:
# validating the file should not need the real ones.
compose-check:
	@if ! command -v docker >/dev/null 2>&1 || ! docker compose version >/dev/null 2>&1; then \
		echo "compose-check: SKIPPED: no 'docker compose' on this machine (install Docker with the compose plugin)."; \
		echo "compose-check: 'go test -run Compose .' still validates docker-compose.yml with compose-go."; \
	else \
		TEMPORAL_DB_PASSWORD="$${TEMPORAL_DB_PASSWORD:-compose-check}" \
		GITFLEET_DB_ADMIN_PASSWORD="$${GITFLEET_DB_ADMIN_PASSWORD:-compose-check}" \
		GITFLEET_DB_PASSWORD="$${GITFLEET_DB_PASSWORD:-compose-check}" \
		GITFLEET_WORKER_DB_PASSWORD="$${GITFLEET_WORKER_DB_PASSWORD:-compose-check}" \
		GITFLEET_STARTER_DB_PASSWORD="$${GITFLEET_STARTER_DB_PASSWORD:-compose-check}" \
		GITFLEET_RUNNER_DB_PASSWORD="$${GITFLEET_RUNNER_DB_PASSWORD:-compose-check}" \
		GITFLEET_TOKEN_KEY="$${GITFLEET_TOKEN_KEY:-compose-check}" \
		GITFLEET_FINDING_KEY="$${GITFLEET_FINDING_KEY:-compose-check}" \
		GITFLEET_PEER_TOKEN="$${GITFLEET_PEER_TOKEN:-compose-check}" \
		GITHUB_TOKEN="$${GITHUB_TOKEN:-}" \
		docker compose -f docker-compose.yml --profile cli config --quiet && \
		echo "compose-check: docker-compose.yml is valid"; \
	fi

## docs-check: the words of the README and docs/, the settings and the workflow
## change ids, printed so that a change sees whether it added to the pile
docs-check:
	$(GO) run ./internal/devstack/docstats

clean:
	rm -rf bin
