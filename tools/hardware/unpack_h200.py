"""Put the vector files of an H200 run (``tools/hardware/h200_run.sh``) where mmasim reads them.

    python tools/hardware/unpack_h200.py OUT/h200-hopper-vectors.part*.tar.xz
        [--dest vectors/hardware/hopper/h200-harness] [--max-random N] [--validate] [--force]

Reads every part (``.tar.xz``; each holds ``hopper/MANIFEST.json`` and whole vector files), checks
each file against the manifest (SHA-256; a file the manifest lists but no part holds is an error,
naming the part), and writes each one with :func:`mmasim.vectors.files.save` into ``--dest``, its
provenance as measured plus ``archive`` (the part it came from).  ``--max-random N`` keeps at most N
of a file's random cases (every k-th, so every tile and word kind keeps its share) and every probe
and cross case, and says so in the provenance (``kept``).  The manifest is written beside the files
as ``MANIFEST.json``.  ``--validate`` then runs ``mmasim validate`` on them (exit status 1 on any
mismatch).

Files whose provenance is not ``hardware`` (a ``--simulate`` rehearsal writes ``simulated`` ones)
are refused under ``vectors/hardware/``: exit status 2.  An existing file is not overwritten
without ``--force`` (exit status 2).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import pathlib
import re
import sys
import tarfile
import tempfile

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
DEST = REPO / "vectors" / "hardware" / "hopper" / "h200-harness"
MEMBER = re.compile(r"^hopper/([A-Za-z0-9_.-]+\.npz|MANIFEST\.json)$")


class Refused(Exception):
    """Exit status 2: the request is not carried out (the message says why)."""


def read_parts(parts) -> tuple:
    """``(manifest, {member name: (bytes, part)})`` of every part; :class:`Refused` on a member
    that is not ``hopper/<name>.npz`` or the manifest, or parts of different runs."""
    manifest, files = None, {}
    for part in map(pathlib.Path, parts):
        try:
            with tarfile.open(part, mode="r:xz") as tar:
                for info in tar:
                    m = MEMBER.match(info.name)
                    if not m or not info.isfile():
                        raise Refused(f"{part}: unexpected member {info.name!r} (a part holds hopper/*.npz and "
                                      "hopper/MANIFEST.json)")
                    data = tar.extractfile(info).read()
                    if m.group(1) == "MANIFEST.json":
                        this = json.loads(data)
                        if manifest is not None and this != manifest:
                            raise Refused(f"{part}: its manifest differs from the other parts' (parts of two runs?)")
                        manifest = this
                    else:
                        files[m.group(1)] = (data, part.name)
        except (OSError, EOFError, tarfile.TarError, lzma.LZMAError, ValueError) as exc:
            raise Refused(f"{part}: not a readable .tar.xz archive part ({type(exc).__name__}: {exc})") from None
    if manifest is None:
        raise Refused("no hopper/MANIFEST.json in the parts given")
    return manifest, files


def check(manifest: dict, files: dict) -> None:
    """Every file the manifest lists is there, with its SHA-256, and nothing else."""
    listed = {pathlib.PurePosixPath(f["member"]).name: f for f in manifest["files"]}
    missing = sorted({f["part"] for n, f in listed.items() if n not in files})
    if missing:
        raise Refused(f"the manifest lists files of parts not given: {', '.join(missing)}")
    extra = sorted(set(files) - set(listed))
    if extra:
        raise Refused(f"files the manifest does not list: {', '.join(extra[:5])}")
    for name, (data, part) in files.items():
        if hashlib.sha256(data).hexdigest() != listed[name]["sha256"]:
            raise Refused(f"{part}: {name} does not match its SHA-256 in the manifest (a damaged part?)")


def random_subset(labels, max_random: int) -> tuple:
    """``(indices, note)``: every case whose label is not a word kind of the random tiles, and at
    most ``max_random`` random cases, every k-th (``k = ceil(random / max_random)``)."""
    from mmasim.harness.measure import KINDS

    labels = np.asarray(labels)
    rand = np.flatnonzero(np.isin(labels, KINDS))
    if rand.size <= max_random:
        return np.arange(labels.size), ""
    step = -(-rand.size // max_random)
    kept = rand[::step]
    idx = np.sort(np.concatenate([np.flatnonzero(~np.isin(labels, KINDS)), kept]))
    return idx, f"{kept.size} of its {rand.size} random cases (every {step}th), every probe and cross case"


def unpack(parts, dest, max_random: int = 0, force: bool = False) -> list:
    """Write the files of ``parts`` into ``dest``; returns the paths written."""
    from mmasim.vectors import files as vectors

    dest = pathlib.Path(dest)
    manifest, files = read_parts(parts)
    check(manifest, files)
    under_hardware = _inside(dest, REPO / "vectors" / "hardware")
    loaded = []
    with tempfile.TemporaryDirectory(prefix="unpack-h200-") as tmp:
        for name, (data, part) in sorted(files.items()):
            path = pathlib.Path(tmp) / name
            path.write_bytes(data)
            vf = vectors.load(path)
            if under_hardware and vf.source != "hardware":
                raise Refused(f"{name} is {vf.source!r}, not hardware: files of a rehearsal never go under "
                              f"vectors/hardware/ (unpack them into another --dest)")
            target = dest / name
            if target.exists() and not force:
                raise Refused(f"{target} exists (--force to overwrite)")
            loaded.append((name, part, vf))
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name, part, vf in loaded:
        prov = dict(vf.provenance, archive=part)
        idx = np.arange(len(vf))
        if max_random:
            idx, note = random_subset(vf.labels, max_random)
            if note:
                prov["kept"] = "; ".join(x for x in (prov.get("kept", ""), note) if x)
                prov["cases"] = int(idx.size)
        arrays = {k: np.asarray(getattr(vf, k))[idx] for k in ("a", "b", "c", "d", "scale_a", "scale_b",
                                                               "sparse_metadata", "labels")
                  if getattr(vf, k) is not None}
        written.append(str(vectors.save(dest / name, arch=vf.arch, instruction=vf.instruction,
                                         qualifiers=vf.qualifiers, provenance=prov,
                                         nan_policy=vf.meta.get("nan_policy", "canonical"),
                                         notes=vf.meta.get("notes", ""), **arrays)))
    (dest / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return written


def _inside(path: pathlib.Path, root: pathlib.Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="unpack_h200.py", description=__doc__.split("\n\n")[0])
    p.add_argument("parts", nargs="+", help="the archive parts, h200-hopper-vectors.partNN.tar.xz")
    p.add_argument("--dest", default=str(DEST), help=f"where the vector files go (default {DEST.relative_to(REPO)})")
    p.add_argument("--max-random", type=int, default=0, help="keep at most N random cases per file (0: all)")
    p.add_argument("--validate", action="store_true", help="run mmasim validate on the files written")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    args = p.parse_args(argv)
    if args.max_random < 0:
        p.error("--max-random must be 0 (all) or a positive number of cases")
    try:
        written = unpack(args.parts, args.dest, args.max_random, args.force)
    except Refused as exc:
        print(f"unpack_h200.py: {exc}", file=sys.stderr)
        return 2
    size = sum(pathlib.Path(w).stat().st_size for w in written)
    print(f"{len(written)} vector file(s), {size / 2**20:.1f} MiB, written to {args.dest}")
    if not args.validate:
        return 0
    from mmasim.vectors import validate as v
    results = v.validate(written)
    print(v.report(results, show_ok=False))
    return 0 if v.summary(results)["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
