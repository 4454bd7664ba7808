#!/usr/bin/env bash
# Installs the real services the integration tests run against, when they are missing:
#   PostgreSQL server, Prometheus + promtool, Alertmanager, Chromium and chromedriver (Debian packages),
#   Apache Kafka broker jars (Maven Central, cached outside the repository),
#   Label Studio (PyPI, in a virtual environment of its own, cached outside the repository, with a
#   database migrated once),
#   the RAG frameworks of tests/clients/ (PyPI, likewise),
#   helm (built from the Go module proxy with `go install`, cached outside the repository),
#   presidio-evaluator's sentence templates (its wheel from PyPI, cached outside the repository).
# Idempotent: a second run on a prepared machine only checks and returns.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${SERVICES_CACHE_DIR:-$HOME/.cache/ragmon-services}"
kafka_version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/kafka-pom.xml")"
mkdir -p "$cache"

need_apt=()
[ -x /usr/lib/postgresql/15/bin/postgres ] || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need_apt+=(postgresql)
command -v prometheus >/dev/null || need_apt+=(prometheus)
command -v promtool >/dev/null || need_apt+=(prometheus)
command -v prometheus-alertmanager >/dev/null || command -v alertmanager >/dev/null || need_apt+=(prometheus-alertmanager)
# the status page's browser test: Debian's Chromium and its WebDriver (never a browser download)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
# the Kafka broker's jars are fetched by Maven and run on Java 17
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # --no-install-recommends keeps node exporters and docs out; policy-rc.d stops the
  # packages from starting system-wide daemons: the tests start private instances.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi

kafka_dir="$cache/kafka-$kafka_version"
if [ ! -f "$kafka_dir/.complete" ]; then
  echo "fetching Apache Kafka $kafka_version jars into $kafka_dir"
  rm -rf "$kafka_dir" && mkdir -p "$kafka_dir"
  mvn -q -B -f "$here/kafka-pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$kafka_dir" -DincludeScope=runtime
  touch "$kafka_dir/.complete"
fi
ls_version="$(sed -n 's:^label-studio==\(.*\)$:\1:p' "$here/label-studio-requirements.txt")"
ls_dir="$cache/label-studio-$ls_version"
if [ ! -f "$ls_dir/.complete" ]; then
  echo "installing Label Studio $ls_version into $ls_dir"
  rm -rf "$ls_dir"
  python3 -m venv "$ls_dir"
  "$ls_dir/bin/python" -m pip install -q --upgrade pip
  "$ls_dir/bin/python" -m pip install -q -r "$here/label-studio-requirements.txt"
  touch "$ls_dir/.complete"
fi
# Label Studio's database, migrated once here (a minute of Django migrations), not at every start:
# the tests start Label Studio on a copy of it (tests/services/harness.py)
ls_migrated="$ls_dir/migrated"
if [ ! -f "$ls_migrated/.complete" ]; then
  echo "migrating a Label Studio database into $ls_migrated"
  rm -rf "$ls_migrated"
  mkdir -p "$ls_migrated/data"
  ls_package="$("$ls_dir/bin/python" -c 'import label_studio, os; print(os.path.dirname(label_studio.__file__))')"
  HOME="$ls_migrated" LABEL_STUDIO_BASE_DATA_DIR="$ls_migrated/data" COLLECT_ANALYTICS=false \
    LATEST_VERSION_CHECK=false DJANGO_SETTINGS_MODULE=core.settings.label_studio \
    "$ls_dir/bin/python" "$ls_package/manage.py" migrate --no-input > "$ls_migrated/migrate.log" 2>&1 \
    || { tail -n 30 "$ls_migrated/migrate.log" >&2; echo "Label Studio's migrations failed" >&2; exit 1; }
  rm -f "$ls_migrated/data/.env"  # its secret key: each start makes its own
  touch "$ls_migrated/.complete"
fi
clients_dir="$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import harness; print(harness.clients_dir())' "$here")"
if [ ! -f "$clients_dir/.complete" ]; then
  echo "installing the RAG frameworks of tests/clients into $clients_dir"
  rm -rf "$clients_dir"
  python3 -m venv "$clients_dir"
  "$clients_dir/bin/python" -m pip install -q --upgrade pip
  "$clients_dir/bin/python" -m pip install -q -r "$here/../clients/requirements.txt" -c "$here/../clients/constraints.txt"
  touch "$clients_dir/.complete"
fi
helm_version="$(sed -n 's:^HELM_VERSION = "\(.*\)"$:\1:p' "$here/harness.py")"
helm_dir="$cache/helm-$helm_version"
if [ ! -x "$helm_dir/helm" ]; then
  # helm's go.mod asks for a newer Go than Debian packages; Go's own toolchain download (from the
  # module proxy) needs Go 1.21 or newer to start from
  if ! command -v go >/dev/null; then
    echo "install.sh: helm $helm_version is built with Go, which is not installed: install Go 1.21 or newer" \
         "(https://go.dev/doc/install) and run it again" >&2
    exit 1
  fi
  echo "building helm $helm_version into $helm_dir"
  mkdir -p "$helm_dir"
  GOBIN="$helm_dir" GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$helm_version"
fi
pe_version="$(sed -n 's:^PRESIDIO_EVALUATOR_VERSION = "\(.*\)"$:\1:p' "$here/harness.py")"
pe_dir="$cache/presidio-evaluator-$pe_version"
if [ ! -f "$pe_dir/templates.txt" ]; then
  echo "fetching presidio-evaluator $pe_version's templates into $pe_dir"
  mkdir -p "$pe_dir"
  python3 -m pip download -q --no-deps --only-binary :all: "presidio-evaluator==$pe_version" -d "$pe_dir"
  python3 - "$pe_dir" <<'PY'
import pathlib, sys, zipfile
folder = pathlib.Path(sys.argv[1])
[wheel] = folder.glob("presidio_evaluator-*.whl")
with zipfile.ZipFile(wheel) as archive:
    data = archive.read("presidio_evaluator/data_generator/raw_data/templates.txt")
(folder / "templates.txt").write_bytes(data)
PY
fi
echo "services ready: kafka $kafka_version in $kafka_dir, label studio $ls_version in $ls_dir, helm in $helm_dir," \
     "frameworks in $clients_dir"
