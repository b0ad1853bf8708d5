#!/usr/bin/env bash
# Nsight Compute's kernel times summed by kernel, for the GPU check's profile
# step (run.sh). Reads the output of
#   ncu --csv --page raw --metrics gpu__time_duration.sum,dram__bytes.sum ...
# (ncu's ==PROF== lines and the profiled program's, then the CSV: a row naming
# the columns, "ID","Process ID",...,"Kernel Name",...,"dram__bytes.sum",
# "gpu__time_duration.sum", a row of their units, then one row per kernel
# launch) and prints, tab-separated, one line for all launches, then one per
# kernel, the longest first:
#   all|NAME  LAUNCHES  MS  SHARE  GBPS
# NAME is ncu's demangled name without "void", its parameters and the
# namespaces mpiasr::, cuda_kernels:: and (anonymous namespace)::; MS the sum
# of its launches' gpu__time_duration (milliseconds); SHARE its percentage of
# all launches' time; GBPS the DRAM bytes its launches moved over that time
# (GB/s). Units: ncu's, with --print-units base or auto (nsecond to second,
# byte to Tbyte). Exits 1 saying what is missing when the input has no such CSV
# or no launch in it.
# Usage: bash ncu-kernels.sh LOG
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: bash ncu-kernels.sh LOG" >&2
  exit 2
fi
awk '
  # The fields of a row of quoted values, into f[1..n]; returns n.
  function fields(line) {
    sub(/\r$/, "", line); sub(/^"/, "", line); sub(/"$/, "", line)
    return split(line, f, /","/)
  }
  function number(text) { gsub(/,/, "", text); return text + 0 }
  # The kernel as the table names it: no return type, parameters or our namespaces.
  function short(name,   depth, i, c) {
    sub(/^void /, "", name)
    if (substr(name, length(name)) == ")") {
      depth = 0
      for (i = length(name); i > 0; i--) {
        c = substr(name, i, 1)
        if (c == ")") depth++
        if (c == "(" && --depth == 0) break
      }
      name = substr(name, 1, i - 1)
    }
    gsub(/mpiasr::|cuda_kernels::|\(anonymous namespace\)::/, "", name)
    return name
  }
  BEGIN {
    ns["nsecond"] = 1; ns["usecond"] = 1e3; ns["msecond"] = 1e6; ns["second"] = 1e9
    bytes["byte"] = 1; bytes["Kbyte"] = 1e3; bytes["Mbyte"] = 1e6; bytes["Gbyte"] = 1e9
    bytes["Tbyte"] = 1e12
  }
  /^"ID","Process ID",/ {
    columns = fields($0)
    kernel = time = dram = 0
    for (i = 1; i <= columns; i++) {
      if (f[i] == "Kernel Name") kernel = i
      if (f[i] == "gpu__time_duration.sum") time = i
      if (f[i] == "dram__bytes.sum") dram = i
    }
    if (!kernel || !time || !dram) {
      print "ncu-kernels.sh: the CSV has no Kernel Name, gpu__time_duration.sum or dram__bytes.sum column" > "/dev/stderr"
      failed = 1; exit 1
    }
    units = 1
    next
  }
  units && /^"/ {
    fields($0)
    time_scale = ns[f[time]]; dram_scale = bytes[f[dram]]
    if (!time_scale || !dram_scale) {
      print "ncu-kernels.sh: unknown units \"" f[time] "\" and \"" f[dram] "\"" > "/dev/stderr"
      failed = 1; exit 1
    }
    units = 0; rows = 1
    next
  }
  rows && /^"/ {
    if (fields($0) != columns) next
    name = short(f[kernel])
    t = number(f[time]) * time_scale; b = number(f[dram]) * dram_scale
    launches[name]++; t_ns[name] += t; dram_bytes[name] += b
    all_launches++; all_ns += t; all_bytes += b
  }
  END {
    if (failed) exit 1
    if (!all_launches) {
      print "ncu-kernels.sh: no Nsight Compute CSV of launches (--csv --page raw) in the input" > "/dev/stderr"
      exit 1
    }
    printf "all\t%d\t%.3f\t100.0\t%.0f\n", all_launches, all_ns / 1e6, all_bytes / all_ns
    for (name in launches)
      printf "%s\t%d\t%.3f\t%.1f\t%.0f\n", name, launches[name], t_ns[name] / 1e6,
        100 * t_ns[name] / all_ns, dram_bytes[name] / t_ns[name]
  }' "$1" | sort -s -t $'\t' -k3,3gr
