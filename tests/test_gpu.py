"""GPU table, name matching, estimates, the ceilings cache and % of peak, all on the CPU; the
last tests measure a real GPU and are skipped without one."""

from __future__ import annotations

import json

import pytest
import torch

from autokernel import gpu
from autokernel.gpu import Ceilings, GPUSpec

# The figures the issue quotes: (GB/s, dense bf16 TFLOPS); None where it quotes no rate.
ISSUE_FIGURES = {
    "H100 SXM": (3350, 989),
    "H100 PCIe": (2000, 756),
    "H200": (4800, 989),
    "B200": (8000, 2250),
    "A100 SXM 80GB": (2039, 312),
    "A100 SXM 40GB": (1555, None),
    "A100 PCIe 80GB": (1935, None),
    "A100 PCIe 40GB": (1555, None),
    "L40S": (864, 362),
    "L40": (864, 181),
    "L4": (300, 121),
    "A10": (600, 125),
    "RTX 4090": (1008, 165),
    "RTX 4080": (716.8, None),
    "RTX 3090": (936, None),
    "RTX 3080": (760, None),
    "MI300X": (5300, 1307),
    "MI325X": (6000, 1307),
    "MI350X": (8000, 2300),
    "MI355X": (8000, 2500),
}


def _ceilings(copy_gbs: float = 4249.0, matmul: float = 727.7) -> Ceilings:
    return Ceilings("NVIDIA H200", copy_gbs, matmul, "2026-12-02T00:00:00+00:00", "2.11.0")


@pytest.mark.parametrize("name", sorted(ISSUE_FIGURES))
def test_table_matches_the_issue_figures(name):
    spec = gpu.GPU_TABLE[name]
    gbs, bf16 = ISSUE_FIGURES[name]
    assert spec.source == "datasheet" and spec.note
    assert spec.mem_bandwidth_gbs == pytest.approx(gbs)
    if bf16 is not None:
        assert spec.bf16_tflops == pytest.approx(bf16, rel=0.01)


def test_every_entry_is_internally_plausible():
    for spec in gpu.GPU_TABLE.values():
        assert spec.bf16_tflops > spec.fp32_tflops > 0
        if spec.tf32_tflops is not None:
            assert spec.tf32_tflops <= spec.bf16_tflops
        if spec.fp8_tflops is not None:
            assert spec.fp8_tflops == pytest.approx(
                2 * spec.bf16_tflops, rel=0.02
            )  # L40S: 733 vs 362
        assert spec.sm_count > 0 and spec.memory_gb and spec.l2_mb


@pytest.mark.parametrize(
    "device_name, expected",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 4080", "RTX 4080"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA GeForce RTX 3080", "RTX 3080"),
        ("AMD Instinct MI300X", "MI300X"),
        ("AMD Instinct MI325X", "MI325X"),
        ("AMD Instinct MI350X", "MI350X"),
        ("AMD Instinct MI355X", "MI355X"),
    ],
)
def test_exact_device_names(device_name, expected):
    spec = gpu.lookup(device_name)
    assert spec is not None and spec.name == expected


@pytest.mark.parametrize(
    "device_name, expected",
    [
        ("nvidia l40s", "L40S"),  # case
        ("  NVIDIA   L40  ", "L40"),  # spacing
        ("NVIDIA L4", "L4"),
        ("L40S", "L40S"),
        ("NVIDIA GeForce RTX4090", "RTX 4090"),
        ("A100-SXM4-40GB", "A100 SXM 40GB"),  # older drivers drop the vendor
        ("NVIDIA A100-SXM-80GB", "A100 SXM 80GB"),
        ("NVIDIA B200-SXM-180GB", "B200"),
        ("AMD Instinct MI300X VF", "MI300X"),  # SR-IOV virtual function: same silicon
    ],
)
def test_normalized_match(device_name, expected):
    spec = gpu.lookup(device_name)
    assert spec is not None and spec.name == expected


@pytest.mark.parametrize(
    "device_name",
    [
        "NVIDIA GeForce RTX 5090",  # not in the table
        "NVIDIA A10G",  # AWS part: not an A10
        "NVIDIA L4O",
        "NVIDIA H100 NVL",  # 94 GB, 3.9 TB/s: not the SXM part
        "NVIDIA H200 NVL",
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA GeForce RTX 3080 Ti",
        "NVIDIA GeForce RTX 4080 SUPER",
        "NVIDIA GeForce RTX 4090 Laptop GPU",
        "AMD Instinct MI300A",
        "NVIDIA A100",  # no form factor or memory size: ambiguous
        "",
    ],
)
def test_unknown_or_different_models_are_not_matched(device_name):
    assert gpu.lookup(device_name) is None


def test_estimate_for_a_made_up_hopper_is_plausible():
    # 1980 MHz and 2619 MHz x 5120 bits: what CUDA reports for an H100 SXM.
    spec = gpu.estimate_spec("Acme H1", 132, 1980, 2619, 5120, (9, 0), memory_gb=80.0)
    h100 = gpu.GPU_TABLE["H100 SXM"]
    assert spec.source == "estimate" and spec.vendor == "nvidia" and spec.arch == "sm_90"
    assert spec.compute_capability == (9, 0)
    assert spec.bf16_tflops == pytest.approx(h100.bf16_tflops, rel=0.02)
    assert spec.tf32_tflops == pytest.approx(h100.tf32_tflops, rel=0.02)
    assert spec.fp8_tflops == pytest.approx(h100.fp8_tflops, rel=0.02)
    assert spec.fp32_tflops == pytest.approx(h100.fp32_tflops, rel=0.1)
    assert spec.mem_bandwidth_gbs == pytest.approx(h100.mem_bandwidth_gbs, rel=0.01)
    assert "reported clock" in spec.note


def test_estimate_without_clocks_uses_a_typical_clock_and_says_so():
    spec = gpu.estimate_spec("Acme H2", 114, None, None, None, (9, 0))
    assert 600 < spec.bf16_tflops < 1000
    assert spec.mem_bandwidth_gbs is None
    assert "typical" in spec.note and "bandwidth unknown" in spec.note


@pytest.mark.parametrize(
    "name, sms, clock, cc, table_name",
    [
        ("NVIDIA GeForce RTX 4090", 128, 2520, (8, 9), "RTX 4090"),  # GeForce half rate
        ("NVIDIA L40S", 142, 2520, (8, 9), "L40S"),
        ("NVIDIA A100-SXM4-80GB", 108, 1410, (8, 0), "A100 SXM 80GB"),
        ("NVIDIA A10", 72, 1695, (8, 6), "A10"),
        ("NVIDIA B200", 148, None, (10, 0), "B200"),
        ("AMD Instinct MI300X", 304, 2100, "gfx942:sramecc+:xnack-", "MI300X"),
        ("AMD Instinct MI355X", 256, 2400, "gfx950", "MI355X"),
    ],
)
def test_estimate_reproduces_known_parts(name, sms, clock, cc, table_name):
    spec = gpu.estimate_spec(name, sms, clock, None, None, cc)
    assert spec.bf16_tflops == pytest.approx(gpu.GPU_TABLE[table_name].bf16_tflops, rel=0.02)


def test_estimate_for_a_newer_minor_uses_its_family():
    b300ish = gpu.estimate_spec("Acme B3", 160, 1980, None, None, (10, 3))
    assert b300ish.arch == "sm_103" and "Blackwell" in b300ish.note
    assert b300ish.bf16_tflops == pytest.approx(160 * 1855e6 * 8192 / 1e12, rel=0.01)


def test_estimate_amd_leaves_bandwidth_unknown():
    spec = gpu.estimate_spec("AMD Instinct MI250X", 220, None, 1600, 8192, "gfx90a")
    assert spec.vendor == "amd" and spec.mem_bandwidth_gbs is None and spec.tf32_tflops is None


def test_detect_without_cuda_is_none(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu.detect() is None
    assert gpu.load_or_measure() is None


def test_measure_without_cuda_raises(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(gpu.NoGPUError):
        gpu.measure_ceilings()


@pytest.fixture
def fake_machine(tmp_path, monkeypatch):
    """A GPU named H200 whose measurement is counted instead of run."""
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gpu, "_device_name", lambda device=None: "NVIDIA H200")
    calls: list[int] = []

    def fake_measure(device=None):
        calls.append(1)
        return _ceilings(copy_gbs=4000.0 + len(calls))

    monkeypatch.setattr(gpu, "measure_ceilings", fake_measure)
    return tmp_path, calls


def test_ceilings_cache_round_trip(fake_machine):
    tmp_path, calls = fake_machine
    first = gpu.load_or_measure()
    assert calls == [1] and first is not None
    path = tmp_path / gpu.CEILINGS_FILE
    saved = json.loads(path.read_text())
    assert list(saved) == [f"NVIDIA H200 | torch {torch.__version__}"]
    second = gpu.load_or_measure()
    assert calls == [1] and second == first  # read back, not measured again
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    forced = gpu.load_or_measure(force=True)
    assert calls == [1, 1] and forced is not None and forced.copy_gbs != first.copy_gbs
    assert gpu.load_or_measure() == forced


@pytest.mark.usefixtures("fake_machine")  # its cache folder and GPU name; measure replaced here
def test_a_remeasure_under_contention_keeps_the_higher_ceiling(monkeypatch):
    # A neighbour on the GPU only slows the copy: the lower reading must not replace the
    # machine's ceiling, or correct kernels read as faster than the hardware.
    readings = iter([_ceilings(copy_gbs=2930.0, matmul=700.0), _ceilings(2380.0, 720.0)])
    monkeypatch.setattr(gpu, "measure_ceilings", lambda device=None: next(readings))
    gpu.load_or_measure()
    again = gpu.load_or_measure(force=True)
    assert (again.copy_gbs, again.matmul_tflops_bf16) == (2930.0, 720.0)
    assert gpu.load_or_measure() == again


def test_ceilings_cache_keeps_other_machines_and_versions(fake_machine):
    tmp_path, calls = fake_machine
    other = {"NVIDIA L4 | torch 2.5.0": {"gpu_name": "NVIDIA L4", "copy_gbs": 250.0}}
    (tmp_path / gpu.CEILINGS_FILE).write_text(json.dumps(other))
    gpu.load_or_measure()
    assert calls == [1]
    saved = json.loads((tmp_path / gpu.CEILINGS_FILE).read_text())
    assert "NVIDIA L4 | torch 2.5.0" in saved and len(saved) == 2


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({f"NVIDIA H200 | torch {torch.__version__}": {"gpu_name": "NVIDIA H200"}}),
        json.dumps(
            {f"NVIDIA H200 | torch {torch.__version__}": {**_ceilings().__dict__, "copy_gbs": -1}}
        ),
    ],
)
def test_ceilings_cache_damaged_entry_is_measured_again(fake_machine, content):
    tmp_path, calls = fake_machine
    (tmp_path / gpu.CEILINGS_FILE).write_text(content)
    assert gpu.load_or_measure() is not None and calls == [1]
    assert gpu.load_or_measure() is not None and calls == [1]


def test_peak_prefers_the_measured_ceiling():
    h200 = gpu.GPU_TABLE["H200"]
    measured = _ceilings()
    assert gpu.peak_bandwidth_gbs(h200, None) == 4800
    assert gpu.peak_bandwidth_gbs(h200, measured) == 4249.0
    assert gpu.pct_of_peak(2124.5, gpu.peak_bandwidth_gbs(h200, measured)) == pytest.approx(50)
    assert gpu.pct_of_peak(2400, gpu.peak_bandwidth_gbs(h200, None)) == pytest.approx(50)
    assert gpu.peak_tflops(h200, None, torch.bfloat16) == 989.5
    assert gpu.peak_tflops(h200, measured, torch.bfloat16) == 727.7
    assert gpu.peak_tflops(h200, measured, torch.float16) == 727.7
    assert gpu.peak_tflops(h200, measured, "tf32") == pytest.approx(727.7 / 2, rel=0.01)
    assert gpu.peak_tflops(h200, measured, torch.float8_e4m3fn) == pytest.approx(2 * 727.7, 0.01)
    assert gpu.peak_tflops(h200, measured, torch.float32) == 67  # no fp32 measurement


def test_peak_without_a_path_or_knowledge_is_none():
    a100 = gpu.GPU_TABLE["A100 SXM 80GB"]
    assert gpu.peak_tflops(a100, None, "fp8") is None
    assert gpu.peak_tflops(gpu.GPU_TABLE["MI355X"], _ceilings(), "tf32") is None
    assert gpu.peak_tflops(None, None, torch.bfloat16) is None
    assert gpu.peak_tflops(None, _ceilings(), torch.bfloat16) == 727.7
    assert gpu.peak_bandwidth_gbs(None, None) is None
    assert gpu.pct_of_peak(100.0, None) is None
    with pytest.raises(ValueError):
        gpu.peak_tflops(a100, None, torch.int8)


def test_roofline():
    h200 = gpu.GPU_TABLE["H200"]
    mem = gpu.roofline(h200, _ceilings(), "memory", 0.0, 4249e6, 1e-3, torch.bfloat16)
    assert mem.unit == "GB/s" and mem.achieved == pytest.approx(4249)
    assert mem.pct == pytest.approx(100) and mem.peak_source == "measured"
    mm = gpu.roofline(h200, None, "compute", 2 * 4096**3, 0.0, 1e-3, torch.bfloat16)
    assert mm.unit == "TFLOPS" and mm.peak == 989.5 and mm.peak_source == "datasheet"
    assert mm.pct == pytest.approx(100 * 137.4 / 989.5, rel=0.01)
    fp32 = gpu.roofline(h200, _ceilings(), "compute", 67e9, 0.0, 1e-3, torch.float32)
    assert fp32.peak_source == "datasheet" and fp32.pct == pytest.approx(100)
    blind = gpu.roofline(None, None, "memory", 0.0, 1e9, 1.0, torch.float16)
    assert blind.peak is None and blind.pct is None and blind.peak_source is None


def test_table_rows_are_the_whole_table():
    rows = gpu.table_rows()
    assert [r["name"] for r in rows] == list(gpu.GPU_TABLE)
    field_names = list(GPUSpec.__dataclass_fields__)
    assert list(rows[0])[: len(field_names)] == field_names
    assert rows[0]["device_names"] == "NVIDIA H100 80GB HBM3"


@pytest.mark.gpu
def test_detect_on_this_gpu():
    spec = gpu.detect()
    assert spec is not None and spec.bf16_tflops > 0
    assert spec.name == torch.cuda.get_device_name() or spec.source == "datasheet"


@pytest.mark.gpu
def test_measured_ceilings_on_this_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(tmp_path))
    measured = gpu.load_or_measure()
    assert measured is not None and measured.gpu_name == torch.cuda.get_device_name()
    spec = gpu.detect()
    assert spec is not None
    if spec.mem_bandwidth_gbs:  # a copy never beats the datasheet, and a GPU reaches > 40 %
        assert 0.4 * spec.mem_bandwidth_gbs < measured.copy_gbs < 1.05 * spec.mem_bandwidth_gbs
    assert 0.2 * spec.bf16_tflops < measured.matmul_tflops_bf16 < 1.1 * spec.bf16_tflops
    assert gpu.load_or_measure() == measured
