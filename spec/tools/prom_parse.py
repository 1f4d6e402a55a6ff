# The Prometheus text in argv[1] as the reference parser (Debian's
# python3-prometheus-client) reads it, one "type name{labels} value" line
# per sample, sorted, into argv[2].  A text it refuses makes it fail.
import sys

from prometheus_client.parser import text_string_to_metric_families

with open(sys.argv[1]) as f:
    text = f.read()
lines = []
for fam in text_string_to_metric_families(text):
    for s in fam.samples:
        labels = ",".join("%s=%s" % kv for kv in sorted(s.labels.items()))
        lines.append("%s %s{%s} %r" % (fam.type, s.name, labels, s.value))
with open(sys.argv[2], "w") as f:
    f.write("\n".join(sorted(lines)) + "\n")
