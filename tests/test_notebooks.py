"""Execute every notebook in notebooks/ (each must finish in < 3 minutes) and check it is stored without outputs."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LIMIT_SECONDS = 180          # the budget per notebook on this machine


def test_notebooks_exist():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05"]


SHARED = (ROOT.parent / "shared" / "data").is_dir()
# With ../shared/data present, each notebook also runs on synthetic data only, as on a fresh clone.
CASES = [(p, False) for p in NOTEBOOKS] + ([(p, True) for p in NOTEBOOKS] if SHARED else [])


@pytest.mark.slow
@pytest.mark.parametrize("path, synthetic_only", CASES,
                         ids=lambda v: v.stem if isinstance(v, Path) else ("synthetic" if v else "data"))
def test_notebook_runs(path, synthetic_only, monkeypatch, tmp_path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: outputs not stripped"
    # The kernel imports duckdp from this checkout, runs in notebooks/ (so ../shared/data resolves)
    # and writes nothing but temporary files.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path))
    if synthetic_only:
        monkeypatch.setenv("DUCKDP_SYNTHETIC_ONLY", "1")
    else:
        monkeypatch.delenv("DUCKDP_SYNTHETIC_ONLY", raising=False)
    client = nbclient.NotebookClient(nb, timeout=LIMIT_SECONDS, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert elapsed < LIMIT_SECONDS, f"{path.name} took {elapsed:.0f} s"


def _bar_chart_cell() -> str:
    nb = nbformat.read(ROOT / "notebooks" / "02_choosing_a_mechanism.ipynb", as_version=4)
    (source,) = [c.source for c in nb.cells if c.cell_type == "code" and "ax.bar(" in c.source]
    return source


def test_notebook_02_hatches_the_unproven_bars():
    """The chart's title says baselines are hatched: the unproven bars must show dark hatch lines on
    their grey face, the others must be plain (issue #14 item 11)."""
    import matplotlib
    import numpy as np
    import pandas as pd

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = pd.DataFrame({"mechanism": ["gw", "mad2r", "policy_gaussian_l1", "weighted_gaussian"],
                            "released": [900, 800, 700, 600], "baseline only": [True, False, True, False]})
    scope = {"plt": plt, "summary": summary, "label": "test"}
    exec(_bar_chart_cell(), scope)
    fig, ax = scope["fig"], scope["ax"]
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    height = image.shape[0]
    for bar, gated in zip(ax.patches[:4], summary["baseline only"], strict=True):
        (x0, y0), (x1, y1) = ax.transData.transform([(bar.get_x(), 0), (bar.get_x() + bar.get_width(), 500)])
        inside = image[height - int(y1) + 3:height - int(y0) - 3, int(x0) + 3:int(x1) - 3]
        dark = (inside.sum(axis=2) < 200).mean()          # share of near-black pixels inside the bar
        assert (dark > 0.02) == gated, (bar, dark)
    plt.close(fig)


def test_notebooks_extra_and_readme():
    """`pip install '.[notebooks]'` brings what the notebooks import; the README says how to open them."""
    tomllib = pytest.importorskip("tomllib")

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["notebooks"]
    assert {e.split(">")[0].split("=")[0] for e in extra} >= {"jupyterlab", "matplotlib", "pandas"}
    assert "pip install '.[notebooks]' && jupyter lab notebooks/" in (ROOT / "README.md").read_text()
