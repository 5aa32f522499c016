rule audit:
    log:
        f"{PAPER}/build/audit.log",
    threads: 1
    resources:
        mem_mb=2000,
    params:
        studies=config["studies"],
        numbers=f"{PAPER}/build/numbers.json",
    shell:
        "specproof audit --studies {params.studies} --manifests {MANIFESTS} --numbers {params.numbers} "
        "2>&1 | tee {log}"


rule drift:
    input:
        lambda w: [f"{RESULTS}/{w.study}/{f}" for f in RAW + DERIVED],
    output:
        f"{RESULTS}/{{study}}/drift.md",
    log:
        f"{RESULTS}/{{study}}/logs/drift.log",
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        "specproof drift {wildcards.study} --results {RESULTS}/{wildcards.study} --manifests {MANIFESTS} "
        "--out {output} > {log} 2>&1"


rule study:
    input:
        f"{RESULTS}/{config.get('study', config['studies'][0])}/drift.md",
