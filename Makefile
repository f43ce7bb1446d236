# Developer entry points. "make test" is the command CI runs.
.PHONY: test build bench fuzz clean

test:
	./scripts/test.sh

build:
	go build -o bin/ ./cmd/...

bench:
	./bench/run.sh

# A short run of every fuzz target.
fuzz:
	./scripts/fuzz.sh 30s

clean:
	rm -rf bin
