# The soak plots: gnuplot -c soak.gp SAMPLES.csv OUT.png "TITLE" (TestSoak's CSV).
set datafile separator ","
set terminal pngcairo size 1100,800 font ",10"
set output ARG2
set multiplot layout 3,1 title ARG3
set key outside right
set xlabel "minutes"
set ylabel "RSS MiB"
set y2label "goroutines / fds"
set ytics nomirror
set y2tics
plot ARG1 using ($1/60):3 with lines title "RSS MiB", \
     ARG1 using ($1/60):4 axes x1y2 with lines title "goroutines", \
     ARG1 using ($1/60):5 axes x1y2 with lines title "open fds"
unset y2label
unset y2tics
set ylabel "latency ms"
set logscale y
plot ARG1 using ($1/60):7 with lines title "p50", \
     ARG1 using ($1/60):8 with lines title "p99", \
     ARG1 using ($1/60):9 with lines title "p99.9"
unset logscale y
set ylabel "ops per 10 s"
set y2tics
plot ARG1 using ($1/60):6 with lines title "operations", \
     ARG1 using ($1/60):10 axes x1y2 with impulses title "failed (right axis)"
unset multiplot
