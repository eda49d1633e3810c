#!/usr/bin/env bash
# Idempotent set-up used by every Makefile target: Debian packages, then a .venv with the pinned
# Python dependencies and this project installed editable.
#   scripts/setup.sh demo   what `make demo` needs: a Java runtime, ActiveMQ and its MQTT/STOMP jars
#   scripts/setup.sh        (or `full`) everything the tests also use: the JDK and jars of the Java
#                           OpenWire agent, Chromium (the report's browser test), mmdebstrap (images)
#   scripts/setup.sh PROFILE --list   print the profile's Debian packages and exit
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${1:-full}
case "$PROFILE" in
  demo | full) ;;
  *) echo "setup: unknown profile '$PROFILE' (demo or full)" >&2; exit 2 ;;
esac

# openjdk-17-jdk-headless: javac builds the brokers' account plugin (harness/account) on first use
DEMO_PKGS=(openjdk-17-jdk-headless activemq libmqtt-client-java libhawtdispatch-java)
# libactivemq-java and libjackson2-databind-java build the Java OpenWire
# agent (docs/install.md); chromium and mmdebstrap are the tests' only
# stress-ng is the CPU hog of the flake hunt (scripts/flakehunt.sh --hog).
TEST_PKGS=(libactivemq-java libjackson2-databind-java chromium mmdebstrap stress-ng)
APT_PKGS=("${DEMO_PKGS[@]}")
if [ "$PROFILE" = full ]; then
  APT_PKGS+=("${TEST_PKGS[@]}")
fi
if [ "${2:-}" = --list ]; then
  echo "${APT_PKGS[@]}"
  exit 0
fi

# A runner doing unattended upgrades holds the dpkg lock: wait for it (10 min) instead of failing.
APT=(apt-get -o DPkg::Lock::Timeout=600)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ -n "${ACTIVEMQ_HOME:-}" ] && command -v java >/dev/null; then
    echo "setup: ACTIVEMQ_HOME=$ACTIVEMQ_HOME given; skipping Debian's activemq packages"
  else
    echo "setup: installing Debian packages: ${missing[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO "${APT[@]}" update -q
    DEBIAN_FRONTEND=noninteractive $SUDO "${APT[@]}" install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

# The compose tests run a Compose: Debian's docker-compose when Docker has no `compose` plugin.
if [ "$PROFILE" = full ] && command -v docker >/dev/null && ! command -v docker-compose >/dev/null \
  && ! docker compose version >/dev/null 2>&1; then
  echo "setup: installing Debian's docker-compose"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO "${APT[@]}" install -y -q --no-install-recommends docker-compose \
    || echo "setup: docker-compose not installed; the compose test will be skipped"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing pinned Python dependencies"
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.lock
  .venv/bin/pip install -q --disable-pip-version-check --no-deps -e .
  echo "$want" > "$stamp"
fi

# The Java OpenWire agent (agent_under_test/java/) -> build/java/bfh-openwire-agent.jar (tests only)
if [ "$PROFILE" = full ]; then
  bash scripts/build_java_agent.sh
fi

# The brokers' account plugin (harness/account), built once here so that no run pays javac (three
# pytest workers built it at once in the gate's first entries). A failure: brokers say why they
# run without it.
.venv/bin/python -c "from harness.account.plugin import jar; jar()" >/dev/null 2>&1 \
  || echo "setup: the brokers' account plugin not built (runs say why)"

# Spark's classes as a class-data-sharing archive: every later cold Spark start saves about 3 s
# (spark_analysis/classarchive.py). Once per machine, about 25 s; a failure only costs that saving.
.venv/bin/python -m spark_analysis.classarchive >/dev/null 2>&1 \
  || echo "setup: Spark class archive not written (Spark starts without it)"
