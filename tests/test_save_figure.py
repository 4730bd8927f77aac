"""zoo.common.out_files's figure helpers (used by the dsmtree, treeflow, egt and fmrg benchmarks): the Agg backend, the
folder created, the dpi honoured, the figure closed."""
from __future__ import annotations

from pathlib import Path


def test_save_figure_writes_at_dpi_into_a_new_folder_and_closes(tmp_path: Path) -> None:
    from PIL import Image

    from zoo.common.out_files import pyplot, save_figure

    plt = pyplot()
    assert plt.get_backend().lower() == "agg"
    fig, ax = plt.subplots(figsize=(2.0, 1.0))
    ax.plot([0, 1], [1, 0])
    target = tmp_path / "new" / "sub" / "f.png"
    assert save_figure(fig, str(target), dpi=50) == target
    assert Image.open(target).size == (100, 50)  # 2 x 1 inches at 50 dpi
    assert fig.number not in plt.get_fignums()
