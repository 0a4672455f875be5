"""`edsb compare`: runs paired on their run key (`paired`, the numbers), shown as tables, Markdown, CSV or JSON
(`render`) and as one HTML page (`html`)."""
