#!/usr/bin/env python3
"""The recorded landscapes the strategy benchmarks run on, and which of them may be fitted on.

Every landscape is a brute-force Kernel Tuner cache file from the AutoTuningAssociation's
benchmark hub (https://github.com/AutoTuningAssociation/benchmark_hub, MIT licence, the
notice is copied beside the files), taken at one pinned commit and checked against its
SHA-256, so a figure computed on them names exactly the data it saw. They are not committed
(about 40 MB): this script extracts them into target/landscapes/{fitting,heldout,...}/.

The split (docs/strategies.md, "Fitting and held-out landscapes"):
- fitting: the five landscapes earlier work on `default` already looked at (the four of the
  comparison and convolution_A4000_T4). Options and design changes of `default` are chosen
  on these only.
- heldout: the others. No fitting or choosing looks at them; they are only reported.
- fitting_extra, heldout_extra (fifth session): eight more landscapes no earlier work looked
  at, from the hub's `currently_unused` folder and `cachefiles`, split by name before any
  was run: for fitting, one per kernel (gemm_RTX_2080_Ti, convolution_RTX_3090,
  convolution_mi50, dedispersion_A6000, pnpoly_RTX_3060_laptop), on which the first five's
  1.000 past 200 evaluations leaves room to see a change; held out, the other three. The
  hub's `convolution_milo/a4000` is in neither: it is the convolution on the A4000 again, as
  convolution_A4000_T4 is. bench/search_quality.sh runs the first two sets unless SETS
  names others.
- heldout_ktt (sixth session): the hub's four KTT recordings (convolution and pnpoly on the
  RTX 2080 Ti and RTX 3090), brute forces by another tuner (KTT 2.1) over spaces of its own
  (6,768 and 4,092 configurations), converted here to Kernel Tuner's cache format. Added
  before any strategy ran on them; held out. The kernels and GPUs are ones the other sets
  have (pnpoly and convolution on the RTX 3090 are fitting landscapes), the spaces and
  measurements are not: a check on new recordings, not on new kernels.

- heldout_h100, fitting_h100 (ninth session): ten landscapes recorded by kerntune itself on
  an H100 (bench/record_landscapes.py: Triton's tutorial matmul over 2,400 configurations,
  one problem shape each), committed in data/landscapes/h100/{heldout,fitting}/. The
  held-out five were added before any strategy ran on them; the fitting five were recorded
  afterwards, for choosing. Another kernel, language and GPU than any other set.

- heldout_h100b (tenth session): five more shapes of the same matmul and space, recorded the
  same way before any strategy ran on them, in data/landscapes/h100/heldout_b/; held out.

- fitting_h100b (eleventh session): five shapes of the same matmul and space with sizes that
  are not all multiples of 16, in data/landscapes/h100/fitting_b/; for choosing only.

- fitting_h100c (twelfth session): the hub's own convolution script (kernels/convolution_milo.py,
  the kernel and space of the hub's convolution landscapes) run through kerntune on an H100
  (bench/record_hub_landscapes.py) with its 15 x 15 filter and with 7 x 7 and 3 x 3, in
  data/landscapes/h100/fitting_c/; assigned to fitting before any strategy ran on them.

- heldout_h100c (thirteenth session): the same script with an 11 x 11 and a 5 x 5 filter,
  assigned to held out in the commit that added the variants, before they were recorded;
  in data/landscapes/h100/heldout_c/.

Usage:
    python3 bench/landscapes.py [--hub GIT_DIR]   # a clone (or bare mirror) of benchmark_hub
    python3 bench/landscapes.py --list fitting    # print the paths of one set (after extracting)
                                                  # (fitting, heldout, fitting_extra, heldout_extra,
                                                  #  heldout_ktt, heldout_h100, fitting_h100, heldout_h100b,
                                                  #  fitting_h100b, fitting_h100c, heldout_h100c)

Without --hub, $KERNTUNE_BENCHMARK_HUB is used, else the hub is cloned into target/.
"""
import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

HUB_URL = "https://github.com/AutoTuningAssociation/benchmark_hub"
HUB_COMMIT = "8eeb99e7179e6838af95d392ac6c60cebfd8c434"
KT = "currently_unused/cachefiles/KernelTuner data"
KTT = "currently_unused/cachefiles/KTT data"

# (name, split, path in the hub, sha256 of the gzipped file)
LANDSCAPES = [
    ("convolution_A100", "fitting", "cachefiles/convolution_milo/A100.json.gz", "de449bddefb42721a9c92d63b0984caeb04cc48519d58135a487e832f8196b9d"),
    ("dedispersion_A100", "fitting", "cachefiles/dedispersion_milo/A100.json.gz", "156253bd3ba2d956496bae6cb57a8601883b9820b50ad5b1b90f02ac4f8ce5fd"),
    ("gemm_RTX_3090", "fitting", f"{KT}/gemm/RTX_3090.json.gz", "a829d92217a8fc0477cb582a98df7496748b5b5d5bffb876db4112f3aff352c3"),
    ("pnpoly_RTX_3090", "fitting", f"{KT}/pnpoly/RTX_3090.json.gz", "d6f238c36dc83dde6b470f9f6488c21140ce233d345ef4fc4e0cd9763b4d3759"),
    ("convolution_A4000_T4", "fitting", "cachefiles/convolution_milo/A4000_T4.json.gz", "64d138eb63a0fb2f0fc21f1f13ccde56ae7bf900945eba40306afcda2d51c161"),
    ("gemm_RTX_2080_Ti", "fitting_extra", f"{KT}/gemm/RTX_2080_Ti.json.gz", "8cd18f61f0c237ed5ca08002b6acd2d7ac665d4200f969aa5b42c181cea2e326"),
    ("convolution_RTX_3090", "fitting_extra", f"{KT}/convolution/RTX_3090.json.gz", "6d6262dacd8cdf1d247529160984b2c932e8b0174c3603c7f6544052a1f34488"),
    ("convolution_mi50", "fitting_extra", f"{KT}/convolution_milo/mi50.json.gz", "d530e8bd0afff72880f77c0c9cd7716bae4879721f9126c582b0a5d95b11705c"),
    ("dedispersion_A6000", "fitting_extra", "cachefiles/dedispersion_milo/A6000.json.gz", "5a9c1e1bc9d6c0c5d8997fa4ea93517e1e26b5ce4449e1f81bc7bed793f76d1b"),
    ("pnpoly_RTX_3060_laptop", "fitting_extra", f"{KT}/pnpoly/RTX_3060_laptop.json.gz", "16d8ca8a7ebbc52d00da8696a81c566960ef412969442263f327aef0b6f1b7d5"),
    ("convolution_A6000", "heldout", "cachefiles/convolution_milo/A6000.json.gz", "e0992a3baa24e0280f1706319145d473933157ef554df094a4357e435cb0de53"),
    ("convolution_MI250X", "heldout", "cachefiles/convolution_milo/MI250X.json.gz", "06d8da1397be0e0cfcccf938968ebf0fa709b53f9314bf091d2b9eb5e2cb1b69"),
    ("convolution_W6600", "heldout", "cachefiles/convolution_milo/W6600.json.gz", "de31e4d1b2f85ee4447123e237e69263667046a8f9b95b3440074aa5412fc6ff"),
    ("convolution_W7800", "heldout", "cachefiles/convolution_milo/W7800.json.gz", "fa1e0d71a9e9b37ba584877d01c3aaab589827ef6a749e404c887aa07f0ec0bf"),
    ("convolution_RTX_Titan", "heldout", f"{KT}/convolution/RTX_Titan.json.gz", "28adba7610a20117c72fc713dc22b6134c5f315fbe5e2412b5c020186359b064"),
    ("dedispersion_A4000", "heldout", "cachefiles/dedispersion_milo/A4000.json.gz", "657e9de1ba7a029324c71a62d13e1dd06a8ae5311af0255c15a086d0bbad6044"),
    ("dedispersion_MI250X", "heldout", "cachefiles/dedispersion_milo/MI250X.json.gz", "bb0120691b702899148ec52c1c73b5168f5409bc3e98cc49873e2f0f8da18136"),
    ("dedispersion_W7800", "heldout", "cachefiles/dedispersion_milo/W7800.json.gz", "50da9d5e88388d9d5d777654530c8416f9b928ca9bb6976d7df2481a1fc4bd8e"),
    ("gemm_RTX_Titan", "heldout", f"{KT}/gemm/RTX_Titan.json.gz", "85d4f512f5f2abb541cc4d8c11aa05aa2157ef5562d79b702bd3caf63023c429"),
    ("gemm_RTX_3060_laptop", "heldout", f"{KT}/gemm/RTX_3060_laptop.json.gz", "e56896a5f098a6bc8751497b8b1a29a019a621e0edf342dc1b4cdc37f1cc786c"),
    ("pnpoly_RTX_Titan", "heldout", f"{KT}/pnpoly/RTX_Titan.json.gz", "ff750b82c6042274d6c3587544e82d96f3f35d37b63ee606b34c9dad16b34f77"),
    ("pnpoly_RTX_2080_Ti", "heldout", f"{KT}/pnpoly/RTX_2080_Ti.json.gz", "b3d3632775fd946c64a15bfefc743a1f6c9b2795cf8ca4a1f14bd083cdc4103a"),
    ("convolution_RTX_2080_Ti", "heldout_extra", f"{KT}/convolution/RTX_2080_Ti.json.gz", "cbbbbd146a7265ca017c682916cfa4460af77960c13604890ff61cf3c2017019"),
    ("convolution_RTX_3060_laptop", "heldout_extra", f"{KT}/convolution/RTX_3060_laptop.json.gz", "7e19e10c43a71916bd5de063047d2fd0c50752fcb9af7cf5257baa262acd7c35"),
    ("dedispersion_W6600", "heldout_extra", "cachefiles/dedispersion_milo/W6600.json.gz", "5d10249dbf24d1b60925d03013a7f1da9200a35578a140490dd61d5b4444f64f"),
    ("convolution_RTX_2080_Ti_ktt", "heldout_ktt", f"{KTT}/KTConvolutionOutput_2080Ti.json.gz", "3a87cc569a2b732e843ebb4ea3b35b784aab3ddb09289597dc40f12c4ccc5a37"),
    ("convolution_RTX_3090_ktt", "heldout_ktt", f"{KTT}/KTConvolutionOutput_3090.json.gz", "9fcfb27029819bb7e7395102a39f1db9688ca458e53db54444f4013ef3ff1e5d"),
    ("pnpoly_RTX_2080_Ti_ktt", "heldout_ktt", f"{KTT}/KTPnpolyOutput_2080Ti.json.gz", "e677d1ea11508c16493f43d815ae57e0196d1bbdd4df34fba1c46aa6e8238c88"),
    ("pnpoly_RTX_3090_ktt", "heldout_ktt", f"{KTT}/KTPnpolyOutput_3090.json.gz", "25eb5b9ae861ed956e0488c86de813356f0610b6b8847d93811f1fd748080d4a"),
]

SPLITS = ["fitting", "heldout", "fitting_extra", "heldout_extra", "heldout_ktt", "heldout_h100", "fitting_h100", "heldout_h100b", "fitting_h100b", "fitting_h100c", "heldout_h100c"]

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "target" / "landscapes"
# The landscapes kerntune recorded itself, committed in the repository (not from the hub).
H100 = ROOT / "data" / "landscapes" / "h100"
RECORDED = {"heldout_h100": H100 / "heldout", "fitting_h100": H100 / "fitting",
            "heldout_h100b": H100 / "heldout_b", "fitting_h100b": H100 / "fitting_b", "fitting_h100c": H100 / "fitting_c",
            "heldout_h100c": H100 / "heldout_c"}


def hub_dir(given):
    hub = given or os.environ.get("KERNTUNE_BENCHMARK_HUB")
    if hub:
        return hub
    clone = ROOT / "target" / "benchmark_hub.git"
    if not clone.exists():
        subprocess.run(["git", "clone", "--bare", "--quiet", HUB_URL, str(clone)], check=True)
    return str(clone)


def from_ktt(document):
    """A KTT 2.x tuning output as a Kernel Tuner cache document: every configuration with its
    kernel duration (KTT's microseconds as milliseconds) and its overhead as the compile
    time; a failed computation is a runtime failure, as Kernel Tuner records one."""
    results = document["Results"]
    names = [c["Name"] for c in results[0]["Configuration"]]
    values = {name: sorted({c["Value"] for r in results for c in r["Configuration"] if c["Name"] == name}) for name in names}
    cache = {}
    for r in results:
        config = {c["Name"]: c["Value"] for c in r["Configuration"]}
        entry = dict(config)
        if r["Status"] == "Ok":
            entry["time"] = r["TotalDuration"] / 1000
            entry["times"] = [c["Duration"] / 1000 for c in r["ComputationResults"]]
        else:
            entry["time"] = "RuntimeFailedConfig"
            entry["times"] = []
        entry["compile_time"] = r["TotalOverhead"] / 1000
        cache[",".join(str(config[n]) for n in names)] = entry
    return {
        "device_name": document["Metadata"]["Device"], "kernel_name": results[0]["KernelName"],
        "problem_size": [], "objective": "time", "tune_params_keys": names, "tune_params": values, "cache": cache,
    }


def extract(hub):
    for split in SPLITS:
        (OUT / split).mkdir(parents=True, exist_ok=True)
    licence = subprocess.run(["git", "--git-dir", hub, "show", f"{HUB_COMMIT}:LICENSE"], check=True, capture_output=True).stdout
    for name, split, path, digest in LANDSCAPES:
        data = subprocess.run(["git", "--git-dir", hub, "show", f"{HUB_COMMIT}:{path}"], check=True, capture_output=True).stdout
        actual = hashlib.sha256(data).hexdigest()
        if digest is not None and actual != digest:
            sys.exit(f"bench/landscapes.py: {path} at {HUB_COMMIT[:8]} has SHA-256 {actual}, expected {digest}")
        if path.startswith(KTT):
            data = gzip.compress(json.dumps(from_ktt(json.loads(gzip.decompress(data)))).encode(), mtime=0)
        (OUT / split / f"{name}.json.gz").write_bytes(data)
        print(f"{split:13} {name:28} {actual[:16]}  {path}")
    for split in SPLITS:
        (OUT / split / "LICENSE").write_bytes(
            f"From {HUB_URL} at {HUB_COMMIT}, under its licence:\n\n".encode() + licence)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hub", help="git directory of a benchmark_hub clone or mirror")
    parser.add_argument("--list", choices=SPLITS, help="print the paths of one set")
    args = parser.parse_args()
    if args.list in RECORDED:
        for path in sorted(RECORDED[args.list].glob("*.json.gz")):
            print(path)
        return
    if args.list:
        for name, split, _, _ in LANDSCAPES:
            if split == args.list:
                print(OUT / split / f"{name}.json.gz")
        return
    extract(hub_dir(args.hub))


if __name__ == "__main__":
    main()
