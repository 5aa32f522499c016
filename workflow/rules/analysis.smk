rule analyze:
    input:
        [f"{RESULTS}/{{study}}/{f}" for f in RAW],
    output:
        [f"{RESULTS}/{{study}}/{f}" for f in DERIVED],
    log:
        f"{RESULTS}/{{study}}/logs/analyze.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        stage_cmd("analyze")


rule figures:
    input:
        study_records,
    output:
        expand(f"{FIGURES}/{{{{study}}}}/{{name}}.{{ext}}", name=FIGURE_NAMES, ext=["pdf", "png"]),
    log:
        f"{FIGURES}/{{study}}/figures.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        records=lambda w: records(w.study),
        out=lambda w: f"{FIGURES}/{w.study}",
    shell:
        "specproof figures --records {params.records} --out {params.out} > {log} 2>&1"


rule numbers:
    input:
        all_study_records,
        benchmark_tables,
    output:
        f"{PAPER}/build/numbers.json",
    log:
        f"{PAPER}/build/numbers.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        studies=config["studies"],
        head=head_study(),
        title=config.get("paper", {}).get("title", "specproof"),
        manifests=MANIFESTS,
        results=RESULTS,
        benchmarks=BENCHMARKS,
    shell:
        "specproof numbers --studies {params.studies} --head {params.head} --title {params.title:q} "
        "--manifests {params.manifests} --results {params.results} --benchmarks {params.benchmarks} "
        "--out {output} > {log} 2>&1"
