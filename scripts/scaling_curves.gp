# Draws the CSV files of scripts/scaling_curves.sh. Called with dir='OUT_DIR' and, for each curve
# whose CSV is there, have_allreduce=1, have_ps=1, have_memory=1.
set datafile separator ","
set terminal pngcairo size 900,560 font "DejaVu Sans,11" noenhanced
set grid
set key top left

if (exists("have_allreduce") && have_allreduce) {
  set output dir."/allreduce.png"
  set title "dtrain bench allreduce: median time per all-reduce (float32 sum, one host)"
  set xlabel "bytes per rank"
  set ylabel "milliseconds"
  set logscale xy
  set xtics ("4 KiB" 4096, "64 KiB" 65536, "1 MiB" 1048576, "16 MiB" 16777216, "256 MiB" 268435456)
  plot for [r in "2 3 4 6"] dir."/allreduce.csv" \
       using (column("ranks") == r + 0 ? column("bytes") : NaN):"median_ms" \
       with linespoints title r." ranks"
  unset logscale
  set xtics autofreq
}

if (exists("have_ps") && have_ps) {
  set output dir."/ps.png"
  set title "dtrain bench ps: push+pull round of a 16 MiB model (mean of the workers' medians)"
  set xlabel "workers"
  set ylabel "milliseconds per round"
  set xrange [0.5:8.5]
  plot for [p in "1 2 3 4"] dir."/ps.csv" \
       using (column("ps") == p + 0 ? column("workers") : NaN):"round_ms" \
       with linespoints title p." ps"
  unset xrange
}

if (exists("have_memory") && have_memory) {
  set output dir."/memory.png"
  set title "peak resident memory per task: Dense 784-N-10, 3 steps (1 ps + 1 worker; 2 all-reduce workers)"
  set xlabel "parameters (millions)"
  set ylabel "MiB"
  plot for [t in "ps ps_worker allreduce_worker"] dir."/memory.csv" \
       using (strcol("task") eq t ? column("parameters") / 1e6 : NaN):"peak_rss_mib" \
       with linespoints title t
}
