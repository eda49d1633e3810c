#!/usr/bin/env bash
# Builds the OpenWire agent (agent_under_test/java/) into build/java/bfh-openwire-agent.jar from
# Debian's JDK and jars; skipped (exit 0, one line) when javac or the jars are missing.
# Rebuilds only when a source is newer than the jar.
set -euo pipefail
cd "$(dirname "$0")/.."

SRC=agent_under_test/java/src
OUT=build/java
JAR=$OUT/bfh-openwire-agent.jar
LIB=${BFH_JAVA_LIB:-/usr/share/java}
# activemq-client and what it loads at run time; Jackson reads workload.json and writes the log
JARS=(activemq-client geronimo-jms_1.1_spec geronimo-j2ee-management-1.1-spec hawtbuf slf4j-api slf4j-simple
  jackson-databind jackson-core jackson-annotations)

if ! command -v javac >/dev/null; then
  echo "build_java_agent: javac not found (apt-get install openjdk-17-jdk-headless); Java agent not built"
  exit 0
fi
cp=()
for j in "${JARS[@]}"; do
  f=$(ls "$LIB/$j.jar" 2>/dev/null || true)
  if [ -z "$f" ]; then
    echo "build_java_agent: $LIB/$j.jar missing (apt-get install libactivemq-java libjackson2-databind-java); Java agent not built"
    exit 0
  fi
  cp+=("$f")
done
if [ -f "$JAR" ] && [ -z "$(find "$SRC" -newer "$JAR" -name '*.java' | head -1)" ]; then
  exit 0
fi
rm -rf "$OUT/classes" && mkdir -p "$OUT/classes"
javac -nowarn -XDignore.symbol.file --release 17 -d "$OUT/classes" -cp "$(IFS=:; echo "${cp[*]}")" \
  $(find "$SRC" -name '*.java') 2>&1 | grep -v "sun.misc.Signal\|^  \|^[0-9]* warning" || true
test -f "$OUT/classes/org/bfh/agent/OpenWireAgent.class"
{
  echo "Main-Class: org.bfh.agent.OpenWireAgent"
  echo "Class-Path: ${cp[*]}"
} > "$OUT/manifest.txt"
jar --create --file "$JAR" --manifest "$OUT/manifest.txt" -C "$OUT/classes" .
echo "build_java_agent: built $JAR"
