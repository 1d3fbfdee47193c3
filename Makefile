# Two commands on a fresh machine: `make run` and `make test`.
# Both create the virtual environment and install what they need first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test soak setup postgres java rabbitmq prometheus lazyfs bench docs typecheck release clean

# Re-install only when the project's dependencies change.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/advisor

# PostgreSQL 15 serves the multi-machine tests; install it when the image lacks it.
postgres:
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	else echo "installing PostgreSQL (apt)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
	  || echo "warning: PostgreSQL could not be installed; its tests will be skipped"; fi

# Java 17 runs the stream-checkpoint template's Spark tests; install it when missing.
# No silent skip: those tests fail with a clear message if java is still missing.
java:
	@if command -v java >/dev/null 2>&1; then :; \
	else echo "installing Java 17 (apt: openjdk-17-jre-headless)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null) \
	  || echo "warning: Java could not be installed; the Spark tests will fail"; fi

# RabbitMQ serves the queue-input tests (a throwaway node on loopback ports, tests/rabbitmq_server.py);
# only the package is needed: the tests start and stop their own node, never the system service.
rabbitmq:
	@if [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then :; \
	else echo "installing RabbitMQ (apt: rabbitmq-server; its service is not started)"; \
	  (apt-get update -qq && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null \
	   && (service rabbitmq-server stop >/dev/null 2>&1 || true)) \
	  || echo "warning: RabbitMQ could not be installed; the queue-input tests will fail"; fi

# Prometheus serves the generated projects' alert tests: promtool checks and unit-tests deploy/prometheus/
# alerts.yml, and one end-to-end test starts the server itself on a loopback port (never the service).
prometheus:
	@if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then :; \
	else echo "installing Prometheus (apt: prometheus, which brings promtool; its service is not started)"; \
	  (apt-get update -qq && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
	   && (service prometheus stop >/dev/null 2>&1 || true)) \
	  || echo "warning: Prometheus could not be installed; the alert-rule tests will fail"; fi

# LazyFS (a FUSE filesystem that drops un-fsynced writes on command) serves the power-loss tests. Found by
# the mount manager itself ($$LAZYFS_BIN, PATH, /usr/local/bin, .lazyfs/bin); else built from
# ../shared/third_party/lazyfs when that folder exists (~2.5 min on 2 cores; into /usr/local as root,
# .lazyfs otherwise). Without it the power-loss tests are skipped and say why and how to get it.
LAZYFS_PY     := templates/project/src/{{package_name}}/drill/lazyfs.py
LAZYFS_SRC    ?= ../shared/third_party/lazyfs
LAZYFS_PREFIX ?= $(if $(filter 0,$(shell id -u)),/usr/local,$(CURDIR)/.lazyfs)
lazyfs:
	@$(PYTHON) "$(LAZYFS_PY)" >/dev/null; if [ $$? = 1 ] && [ -x $(LAZYFS_SRC)/build.sh ]; then \
	  echo "building LazyFS from $(LAZYFS_SRC) into $(LAZYFS_PREFIX) (~2.5 minutes)"; \
	  $(LAZYFS_SRC)/build.sh $(LAZYFS_PREFIX) || true; fi; \
	$(PYTHON) "$(LAZYFS_PY)" >/dev/null || { $(PYTHON) "$(LAZYFS_PY)"; \
	  echo "warning: LazyFS cannot run here; the power-loss tests will be skipped"; }

# Three pytest workers on two cores: most long tests wait on their subprocesses, disks and servers.
# Work stealing: each worker starts on its share of the longest tests (tests/suite_share.py).
PYTEST_WORKERS ?= 3

test: setup postgres java rabbitmq prometheus lazyfs
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal -q $(PYTEST_ARGS)

# Many seeds of every drill mode (hours on 2 cores): the tests marked soak, left out of `make test`.
soak: setup postgres java rabbitmq prometheus lazyfs
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal -q -m soak $(PYTEST_ARGS)

# The benchmarks' own extra (pyproject.toml: bench = DBOS, bench_curve.py's fourth side); a failed
# install leaves that side skipped (it says so), the other benchmarks run, and the next
# `make bench` tries the install again.
BENCH_STAMP := $(VENV)/.bench-stamp
$(BENCH_STAMP): pyproject.toml $(STAMP)
	@$(BIN)/python -m pip install --quiet -e '.[bench]' && touch $(BENCH_STAMP) \
	  || echo "warning: the bench extra (dbos) could not be installed; bench_curve.py skips its DBOS side"

bench: setup $(BENCH_STAMP)
	$(BIN)/python benchmarks/run_all.py

docs: setup
	$(BIN)/python -m advisor.docgen.catalog_page --write docs/catalog.md
	$(BIN)/python -m advisor.docgen.decision_page --write docs/decision-model.md

typecheck: setup
	$(BIN)/python -m mypy

# A release: everything committed, pyproject's version tagged (Copier's `update` takes the newest
# tag), then the template of this release becomes the fixture the next release's update test
# starts from (tests/test_template_update.py), committed. docs/template-internals.md, "Releases".
release:
	@test -z "$$(git status --porcelain)" || { echo "make release: commit or stash your changes first (git status)" >&2; exit 2; }
	@v=$$(sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml); \
	 test -n "$$v" || { echo "make release: no version = \"...\" line in pyproject.toml" >&2; exit 2; }; \
	 if git rev-parse -q --verify "refs/tags/v$$v" >/dev/null; then \
	   echo "make release: v$$v is tagged already; raise the version in pyproject.toml and commit" >&2; exit 2; fi; \
	 git tag -a "v$$v" -m "Continuity Advisor $$v" && \
	 git archive --format=tar "v$$v" templates copier.yml | gzip -9n > tests/fixtures/template-previous.tar.gz && \
	 git add tests/fixtures/template-previous.tar.gz && \
	 { git diff --cached --quiet || git commit -q -m "The update test starts from v$$v's template"; } && \
	 echo "tagged v$$v; push it with: git push origin v$$v"

clean:
	rm -rf $(VENV) .pytest_cache
