"""The post-processor: results folders -> one self-contained HTML report (plotly) + PNG charts.

    run_data    read and validate one results folder (summary.json, llm_timeseries.csv,
                histograms.json, Locust's CSVs) into a `RunData`
    tables      derived tables: one row per step (or per run), the comparison table
    capacity    SLO checks per step and the highest step meeting every SLO
    mbu         memory bandwidth utilisation from model size, TPOT and peak bandwidth
    chart       the `Chart` record, run colours and the common layout every figure uses
    charts      plotly figures (latency/throughput curves, metrics against load, capacity)
    timeline    plotly figures over time (LLM time series, Locust history, failures)
    distributions  histogram / CDF figures (histograms.json, or the summary's percentiles)
    server      the server's perspective (server_metrics.csv, summary "server")
    telemetry_charts  GPU and host telemetry (telemetry.csv, summary "telemetry")
    html        the HTML page (plotly.js inline: works offline)
    images      PNG export of the figures (kaleido + a Chromium browser)
    build       everything above, in order: `build_report`
    cli         the `llm-locust report` sub-command
    bootstrap   the two-level bootstrap (windows within a run, runs within a side) behind `compare`
    compare     baseline vs candidate folders: per metric the change, its interval, the verdict, the gate
    compare_page  the HTML page of a comparison, with the chart of every change and its interval
    compare_cli the `llm-locust compare` sub-command (exit 3 on a regression beyond its limit)

Never imports Locust, nor anything that does (Locust monkey-patches the standard library).
"""
