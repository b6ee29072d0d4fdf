"""A small CSV reader for the contacts import job.

The input comes from spreadsheet exports, one record per line (fields never contain line
breaks). Rules for one line:

* fields are separated by ``delimiter`` (default ",");
* a field may be wrapped in double quotes; inside quotes the delimiter is an ordinary
  character and a doubled quote ("") stands for one literal quote character;
* whitespace around an unquoted field is stripped, the text inside quotes is kept as is
  (whitespace between the delimiter and an opening quote is ignored);
* empty fields are kept, including a trailing empty field ("a,b," has three fields);
* a quoted field that is never closed is an error (ValueError).
"""


def split_row(line, delimiter=","):
    """Split one CSV line into a list of field strings."""
    fields = []
    for raw in line.split(delimiter):
        raw = raw.strip()
        if len(raw) >= 2 and raw[0] == raw[-1] == '"':
            raw = raw[1:-1].replace('""', '"')
        fields.append(raw)
    return fields


def read_records(text, delimiter=","):
    """Parse CSV text with a header line into a list of dicts.

    Blank lines are skipped. A row with a different number of fields than the header
    raises ValueError mentioning the 1-based line number.
    """
    records = []
    header = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = split_row(line, delimiter)
        if header is None:
            header = fields
            continue
        if len(fields) != len(header):
            raise ValueError(f"line {lineno}: expected {len(header)} fields, got {len(fields)}")
        records.append(dict(zip(header, fields, strict=True)))
    return records
