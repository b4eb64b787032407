# Cairn. `make run` serves on the embedded default; `make test` runs every test.
GO       ?= go
BIN      := bin/cairn
DATA     ?= data
PKGS     := ./...
# make test names ./test/ first: the end-to-end package is the longest (~16 min), and go
# test builds and starts packages in the order given, so it runs beside the others.
# Benchmarks: rerun with `make bench`; BENCH_EVENTS sizes the big-history cases.
BENCH_EVENTS ?= 1000000

.PHONY: build run test test-short bench lint fuzz clean

# The version `cairn version` and LINSTOR's controller version show: the commit, as git
# describes it (a tag once there is one), "dev" outside a git checkout.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build:
	$(GO) build -ldflags "-X github.com/cairn-io/cairn.Version=$(VERSION)" -o $(BIN) ./cmd/cairn

run: build
	./$(BIN) serve --data $(DATA) --log-format console

test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 25m ./test/ $(PKGS)

fuzz:
	$(GO) test -run XXX -fuzz FuzzDecode -fuzztime 60s ./commands/
	$(GO) test -run XXX -fuzz FuzzReadLeaf -fuzztime 60s ./storage/zfs/
	$(GO) test -run XXX -fuzz FuzzUnpackNVList -fuzztime 60s ./storage/zfs/

bench: build
	CAIRN_BENCH_EVENTS=$(BENCH_EVENTS) CAIRN_BIN=$(CURDIR)/$(BIN) $(GO) test -run XXX -bench . -benchtime 1x -count 1 -timeout 60m ./test/bench/ | tee bench.out

lint:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -rf bin bench.out
