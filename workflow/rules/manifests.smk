rule audit:
    # besides the frozen sets (read by hash, not as inputs): the paper and what it is built
    # from, compared byte for byte with a rebuild, and the cited figures with their quotes
    input:
        pdf=f"{PAPER}/paper.pdf",
        source=config.get("paper_source", "paper/paper.typ"),
        cited="paper/cited.yaml",
        config="config/config.yaml",
        numbers=f"{PAPER}/build/numbers.json",
        figures=expand(f"{FIGURES}/{{set}}/{{name}}.png", set=head_study(), name=FIGURE_NAMES),
        machines=f"{FIGURES}/machines/verify_cost_machines.png" if len(head_machines()) > 1 else [],
        breakeven=break_even_png(),
    log:
        f"{PAPER}/build/audit.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        studies=config["studies"],
        manifests=MANIFESTS,
        benchmarks=BENCHMARKS,
        figures=lambda w, input: str(Path(input.figures[0]).parent),
        machines=lambda w, input: str(Path(input.machines if input.machines else input.figures[0]).parent),
        breakeven=lambda w, input: str(Path(input.breakeven[0] if input.breakeven else input.figures[0]).parent),
    shell:
        "specproof audit --studies {params.studies:q} --manifests {params.manifests:q} "
        "--numbers {input.numbers:q} --benchmarks {params.benchmarks:q} --cited {input.cited:q} "
        "--config {input.config:q} --paper-pdf {input.pdf:q} --paper-source {input.source:q} --figures {params.figures:q} "
        "--machine-figures {params.machines:q} --map-figures {params.breakeven:q} 2>&1 | tee {log:q}"


rule drift:
    input:
        lambda w: study_files(f"{RESULTS}/{w.study}"),
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
        "specproof drift {wildcards.study} --results {params.results:q} --manifests {params.manifests:q} "
        "--out {output:q} > {log:q} 2>&1"


rule study_numbers:
    input:
        lambda w: study_files(f"{RESULTS}/{w.study}"),
    output:
        f"{RESULTS}/{{study}}/report/numbers.json",
    log:
        f"{RESULTS}/{{study}}/logs/report_numbers.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        # <results>/<study>/report/numbers.json: the results directory from the output
        results=lambda w, output: str(Path(output[0]).parents[2]),
        benchmarks=lambda w, output: str(Path(output[0]).parent / "no-benchmarks"),
        manifests=MANIFESTS,
    shell:
        "specproof numbers --studies {wildcards.study} --head {wildcards.study} "
        "--title 'specproof report: {wildcards.study}' --manifests {params.manifests:q} "
        "--results {params.results:q} --benchmarks {params.benchmarks:q} "
        "--out {output:q} > {log:q} 2>&1"


rule study_report:
    input:
        source="workflow/report/report.typ",
        cited="paper/cited.yaml",
        numbers=f"{RESULTS}/{{study}}/report/numbers.json",
        figures=expand(f"{FIGURES}/{{{{study}}}}/{{name}}.png", name=FIGURE_NAMES),
    output:
        f"{RESULTS}/{{study}}/report.pdf",
    log:
        f"{RESULTS}/{{study}}/logs/report.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        figures=lambda w: f"{FIGURES}/{w.study}",
    shell:
        "specproof paper --source {input.source:q} --numbers {input.numbers:q} --figures {params.figures:q} "
        "--cited {input.cited:q} --out {output:q} > {log:q} 2>&1"


rule study:
    input:
        f"{RESULTS}/{split_set(config.get('study', head_study()))[0]}/drift.md",
        f"{RESULTS}/{split_set(config.get('study', head_study()))[0]}/report.pdf",
