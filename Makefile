# Developer entry points. "make test" is the command CI runs.
.PHONY: test build bench bench-aiod fuzz clean

test:
	./scripts/test.sh

build:
	go build -o bin/ ./cmd/...

bench:
	./bench/run.sh

# The sandbox daemon against bare fork/exec, net/http and grep -r.
bench-aiod:
	go run ./bench/aiod

# A short run of every fuzz target.
fuzz:
	./scripts/fuzz.sh 30s

clean:
	rm -rf bin
