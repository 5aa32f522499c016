rule audit:
    log:
        f"{PAPER}/build/audit.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        studies=config["studies"],
        numbers=f"{PAPER}/build/numbers.json",
        manifests=MANIFESTS,
        benchmarks=BENCHMARKS,
    shell:
        "specproof audit --studies {params.studies} --manifests {params.manifests} "
        "--numbers {params.numbers} --benchmarks {params.benchmarks} 2>&1 | tee {log}"


rule drift:
    input:
        lambda w: [f"{RESULTS}/{w.study}/{f}" for f in RAW + DERIVED],
    output:
        f"{RESULTS}/{{study}}/drift.md",
    log:
        f"{RESULTS}/{{study}}/logs/drift.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        results=lambda w: f"{RESULTS}/{w.study}",
        manifests=MANIFESTS,
    shell:
        "specproof drift {wildcards.study} --results {params.results} --manifests {params.manifests} "
        "--out {output} > {log} 2>&1"


rule study:
    input:
        f"{RESULTS}/{config.get('study', config['studies'][0])}/drift.md",
