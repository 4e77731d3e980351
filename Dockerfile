# Keel's release image: a static binary on distroless/static (CA
# certificates, /etc/passwd with the nonroot user 65532, tzdata; no shell,
# no package manager). Build it from the repository root:
#
#   docker build -t keel .
#   docker run --rm -p 127.0.0.1:7878:7878 -v $PWD/keel.yaml:/etc/keel/keel.yaml:ro keel
#
# deploy/compose.yaml runs two replicas of it. BENCHMARKS.md ("Session 5")
# has the binary's size; the image is that plus the base (about 2 MB).

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (CGO_ENABLED=0: the SQLite request log is modernc.org/sqlite, pure
# Go), reproducible paths, no symbol table or DWARF.
RUN CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /out/keel ./cmd/keel \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/keel /usr/local/bin/keel
# The request log's directory (request_log.path in deploy/keel.yaml), owned
# by the user Keel runs as, so a named volume mounted there is writable.
COPY --from=build --chown=65532:65532 /out/state /var/lib/keel
USER 65532:65532
WORKDIR /var/lib/keel
EXPOSE 7878
ENTRYPOINT ["/usr/local/bin/keel"]
CMD ["serve", "--config", "/etc/keel/keel.yaml"]
