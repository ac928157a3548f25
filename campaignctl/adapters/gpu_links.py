"""A GPU's interconnect as NVML reports it, without root: PCIe throughput and NVLink data counters.

- PCIe: `nvmlDeviceGetPcieThroughput(handle, NVML_PCIE_UTIL_TX_BYTES | NVML_PCIE_UTIL_RX_BYTES)`,
  "a byte counter over a 20ms interval and thus the PCIe throughput over that interval", in KB/s
  (NVML API reference; Maxwell and newer, not in vGPU guests). A rate over 20 ms, not over the
  sampling interval: one look, which is what it can be.
- NVLink: `nvmlDeviceGetFieldValues` with NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX (138) and _RX
  (139), "NVLink TX/RX Data throughput in KiB": counters of payload data, one per link, the link
  given as the field's scopeId (nvml.h: "for NVLink throughput counter data, scopeId can
  represent linkId"). All links (NVML_NVLINK_MAX_LINKS) are asked in one call; a link the GPU
  does not have answers its own error in its field, and a GPU without NVLink none at all. The
  reader sums the links and reports the bytes since its last reading.
Each call fails on its own (an old pynvml without the function, a MIG or vGPU device): that
figure is absent, the others stand."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any

KIB = 1024.0
MIB = float(2**20)
NVLINK_TX, NVLINK_RX = 138, 139  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX / _RX
MAX_LINKS = 36  # NVML_NVLINK_MAX_LINKS of nvidia-ml-py 12.5xx
NVML_SUCCESS = 0


class LinkReader:
    """One GPU's PCIe rates and NVLink bytes since the last read."""

    def __init__(self, nvml: ModuleType, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle
        self._last: tuple[int, int] | None = None
        self._nvlink = getattr(nvml, "nvmlDeviceGetFieldValues", None) is not None

    def read(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, counter in (("pcie_tx_kbs", getattr(self._nvml, "NVML_PCIE_UTIL_TX_BYTES", 0)),
                              ("pcie_rx_kbs", getattr(self._nvml, "NVML_PCIE_UTIL_RX_BYTES", 1))):
            kbs = self._call("nvmlDeviceGetPcieThroughput", partial(_with, self._handle, counter))
            if isinstance(kbs, (int, float)):
                out[name] = float(kbs)  # NVML's own unit, KB/s
        totals = self._nvlink_totals() if self._nvlink else None
        if totals is None:
            self._nvlink = False  # no NVLink here: not asked again
        else:
            if self._last is not None:
                out["nvlink_tx_mb"] = round(max(0, totals[0] - self._last[0]) * KIB / MIB, 3)
                out["nvlink_rx_mb"] = round(max(0, totals[1] - self._last[1]) * KIB / MIB, 3)
            self._last = totals
        return out

    def _nvlink_totals(self) -> tuple[int, int] | None:
        """KiB sent and received over every link the GPU has; None where it has none."""
        fields = [(field, link) for field in (NVLINK_TX, NVLINK_RX) for link in range(MAX_LINKS)]
        values = self._call("nvmlDeviceGetFieldValues", partial(_with, self._handle, fields))
        if values is None:
            return None
        sums, found = {NVLINK_TX: 0, NVLINK_RX: 0}, False
        for value in values:
            if getattr(value, "nvmlReturn", 1) == NVML_SUCCESS and value.fieldId in sums:
                sums[value.fieldId] += int(value.value.ullVal)
                found = True
        return (sums[NVLINK_TX], sums[NVLINK_RX]) if found else None

    def _call(self, name: str, use: Callable[[Any], Any]) -> Any:
        function = getattr(self._nvml, name, None)
        if function is None:
            return None
        try:
            return use(function)
        except self._nvml.NVMLError:
            return None


def _with(handle: Any, argument: Any, function: Callable[[Any, Any], Any]) -> Any:
    return function(handle, argument)
