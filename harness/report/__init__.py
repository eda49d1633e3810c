"""What a judged run shows: report.html, summary.md, the fleet views, the console table."""
