"""AMD CDNA1-3 matrix cores (MI100, MI200, MI300): ``v_mfma``.

Arithmetic comes entirely from core accumulators composed by the tables
``archs/cdna1.toml``, ``cdna2.toml`` and ``cdna3.toml`` (docs/datapaths.md section 8,
source MMA-Sim 2.1.1): FMA chains (``fma``), E-FDPA (``exact_sum``), FTZ mul-add
(``ftz_mul_add``), TR-FDPA and GTR-FDPA (``two_stage_window``), over the core's
f64/f32/xf32/f16/bf16 and fnuz fp8 (e4m3fnuz, e5m2fnuz) formats.  Instructions
are looked up by MMA-Sim's suffix (``f32_32x32x8f16``) or the full mnemonic
(``v_mfma_f32_32x32x8f16``), listed as literal names in the tables.
"""

from mmasim.plugins import hookimpl
from mmasim.tables import table_path


@hookimpl
def mmasim_architectures():
    return [table_path("mmasim_archs", name) for name in ("cdna1.toml", "cdna2.toml", "cdna3.toml")]
