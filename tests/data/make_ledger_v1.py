"""Write tests/data/ledger_v1.json with the ledger code before the accountant: run with the package of commit
759c3f3 on PYTHONPATH (git archive 759c3f3 duckdp sql | tar -x -C DIR), PYTHONDONTWRITEBYTECODE=1."""
import json
import sys

import duckdb

import duckdp

con = duckdb.connect()
con.execute("CREATE TABLE t AS SELECT (i % 300) AS user_id, (i % 7) AS item FROM range(3000) r(i)")
out = {}
for name, kw, calls in [("Z", dict(rho=1.0, delta=1e-5), "z"), ("E", dict(epsilon=1.0, delta=1e-5), "e")]:
    s = duckdp.Session(con, ledger_table=name, anchor=False, **kw)
    if calls == "z":
        s.select("t", algo="dpsips", rho=0.2, delta=2e-6, max_contributions=2, seed=1)
        s.count_release("t", rho=0.1, delta=1e-6, seed=1)
    else:
        s.select("t", algo="dpsips", epsilon=0.4, delta=2e-6, max_contributions=2, seed=1)
        s.count_release("t", rho=0.002, delta=1e-6, seed=1)
    rows = con.execute(f"SELECT * FROM {name} ORDER BY seq").to_arrow_table().to_pylist()
    head = con.execute(f"SELECT * FROM {name}__duckdp_head").to_arrow_table().to_pylist()
    for r in rows:
        r["time"] = r["time"].isoformat()
    out[name] = {"budget": kw, "rows": rows, "head": head, "spent": [s.spent.value, s.spent.delta]}
json.dump(out, open(sys.argv[1], "w"), indent=1)
