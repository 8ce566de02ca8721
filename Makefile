# ctrlquorum — build, run and test.
GO        ?= go
BIN       := bin/ctrlnode
PKGS      := ./...
FUZZTIME  ?= 30s
BENCHTIME ?= 1x

.PHONY: all build run test test-short bench fuzz lint deps clean integration ctrlnode-bench

all: lint build test

build:
	$(GO) build -o $(BIN) ./cmd/ctrlnode

## run: three voters and three brokers on localhost, data in ./ctrlnode-data
run:
	$(GO) run ./cmd/ctrlnode dev --data ./ctrlnode-data

## test: the whole suite (unit, race, process-level); installs what it needs first
test: deps lint
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	cd integration/clients/sarama && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...

test-short:
	$(GO) test -short -count=1 $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 60m $(PKGS)

## integration: the process-level tests against the built binary
integration:
	$(GO) test -race -count=1 -timeout 10m ./integration/...

## ctrlnode-bench: the benchmark scenarios as one table (BENCHARGS to change sizes)
BENCHARGS ?=
ctrlnode-bench:
	$(GO) run ./cmd/ctrlnode bench $(BENCHARGS)

## fuzz: each decoder fuzz target for FUZZTIME
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeBatch$$' -fuzztime $(FUZZTIME) ./raftlog
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRecord$$' -fuzztime $(FUZZTIME) ./raftlog
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME) ./raftlog/logstore
	$(GO) test -run '^$$' -fuzz '^FuzzRestore$$' -fuzztime $(FUZZTIME) ./fsm
	$(GO) test -run '^$$' -fuzz '^FuzzApply$$' -fuzztime $(FUZZTIME) ./fsm
	$(GO) test -run '^$$' -fuzz '^FuzzHandleFrame$$' -fuzztime $(FUZZTIME) ./transport/kafkawire
	$(GO) test -run '^$$' -fuzz '^FuzzHandle$$' -fuzztime $(FUZZTIME) ./transport/listener
	$(GO) test -run '^$$' -fuzz '^FuzzAgentRequest$$' -fuzztime $(FUZZTIME) ./broker
	$(GO) test -run '^$$' -fuzz '^FuzzSegmentReader$$' -fuzztime $(FUZZTIME) ./broker/partlog
	$(GO) test -run '^$$' -fuzz '^FuzzScramServer$$' -fuzztime $(FUZZTIME) ./transport/sasl
	$(GO) test -run '^$$' -fuzz '^FuzzPlainServer$$' -fuzztime $(FUZZTIME) ./transport/sasl

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## deps: installs the system packages the tests use (as root, with apt-get); fails naming any still missing
deps:
	@./.ci/deps.sh

clean:
	rm -rf bin

## jepsen: the jepsen-style run against the built binary; DURATION, SEED (0: random, printed),
## NEMESIS (all, none, process, partition, broker or a list of kinds), JEPSEN_REPORT (report folders)
DURATION      ?= 30m
SEED          ?= 0
NEMESIS       ?= all
JEPSEN_REPORT ?= $(or $(TMPDIR),/tmp)/ctrlquorum-jepsen
.PHONY: jepsen
jepsen:
	$(GO) test ./integration/jepsen -run '^TestJepsen$$' -count=1 -v -timeout 2h \
		-args -duration=$(DURATION) -seed=$(SEED) -nemesis=$(NEMESIS) -report=$(JEPSEN_REPORT)

## jepsen-bugs: a run per planted bug (ctrlnode built with -tags plantedbugs), each of which must
## make its data checker fail; BUG_DURATION each (default 45s), SEED, JEPSEN_REPORT
BUG_DURATION ?= 45s
.PHONY: jepsen-bugs
jepsen-bugs:
	$(GO) test ./integration/jepsen -run '^TestJepsenPlantedBugs$$' -count=1 -v -timeout 1h \
		-args -planted-bugs=all -duration=$(BUG_DURATION) -seed=$(SEED) -report=$(JEPSEN_REPORT)
