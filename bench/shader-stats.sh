#!/usr/bin/env bash
# What the Vulkan driver compiles each of a command's kernels to: registers per thread, shared
# memory, spills, as the driver reports them (VK_KHR_pipeline_executable_properties; NVIDIA
# has it, lavapipe does not).
#
#   bash bench/shader-stats.sh OUT_DIR COMMAND [ARGS...]
#     e.g. bash bench/shader-stats.sh /tmp/st wgrt bench -m model.gguf -p 16 -n 4 -r 1
#
# Runs COMMAND with WGRT_SHADER_DUMP=OUT_DIR/dump (Dawn's dump_shaders toggle: each pipeline's
# SPIR-V disassembly, under the pipeline's key), assembles each SPIR-V dump with spirv-as
# (Debian spirv-tools; tools/device-pack.sh carries it) and runs wgrt_shader_stats on all of
# them. Writes OUT_DIR/stats.tsv (pipeline, then the driver's statistics) and prints it.
# On the GPU machine: source tools/device-env.sh first (wgrt, wgrt_shader_stats, spirv-as on PATH).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bash bench/shader-stats.sh OUT_DIR COMMAND [ARGS...]" >&2; exit 2; }
out=$1
shift
rm -rf "$out/dump" "$out/spv"
mkdir -p "$out/dump" "$out/spv"
WGRT_SHADER_DUMP="$out/dump" "$@" >"$out/command.log" 2>&1 || { tail -20 "$out/command.log" >&2; exit 1; }

spvs=()
declare -A label
for f in "$out"/dump/*.txt; do
  grep -q '^/\* Dumped generated SPIRV disassembly \*/' "$f" || continue
  name=$(basename "$f" .txt)
  sed -n '1s|^// wgrt pipeline: ||p' "$f" >"$out/spv/$name.label"
  sed '1,2d' "$f" >"$out/spv/$name.spvasm"
  version=$(sed -n 's/^; Version: \([0-9.]*\)$/\1/p' "$out/spv/$name.spvasm" | head -1)
  spirv-as --target-env "spv${version:-1.3}" "$out/spv/$name.spvasm" -o "$out/spv/$name.spv"
  spvs+=("$out/spv/$name.spv")
done
[ ${#spvs[@]} -gt 0 ] || { echo "shader-stats: no SPIR-V in $out/dump (hint: a Vulkan adapter)" >&2; exit 1; }

wgrt_shader_stats "${spvs[@]}" >"$out/spv/stats.txt" || true
# One row per pipeline: its key, then the driver's statistics.
while IFS= read -r line; do
  case "$line" in "#"*) echo "$line"; continue ;; esac
  spv=${line%% | *}
  printf '%s\t%s\n' "$(cat "${spv%.spv}.label")" "${line#* | }"
done <"$out/spv/stats.txt" | tee "$out/stats.tsv"
