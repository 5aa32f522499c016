rule batch_invariance:
    input:
        f"{RESULTS}/{{study}}/reference.seal.json",
    output:
        f"{RESULTS}/{{study}}/batch_invariance.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/batch_invariance.log",
    threads: 2
    resources:
        mem_mb=8000,
    params:
        cmd=stage_cmd("batch_invariance"),
    shell:
        "{params.cmd}"


rule qualification:
    input:
        f"{RESULTS}/{{study}}/reference.seal.json",
        f"{RESULTS}/{{study}}/runs.parquet",
    output:
        f"{RESULTS}/{{study}}/qualification.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/qualification.log",
    threads: 2
    resources:
        mem_mb=8000,
    params:
        cmd=stage_cmd("qualification"),
    shell:
        "{params.cmd}"


rule predict:
    input:
        f"{RESULTS}/{{study}}/reference.seal.json",
    output:
        f"{RESULTS}/{{study}}/prediction_seal.json",
    log:
        f"{RESULTS}/{{study}}/logs/predict.log",
    threads: 2
    resources:
        mem_mb=8000,
    params:
        cmd=stage_cmd("predict"),
    shell:
        "{params.cmd}"


rule predicted:
    input:
        f"{RESULTS}/{{study}}/prediction_seal.json",
    output:
        f"{RESULTS}/{{study}}/prediction.json",
    log:
        f"{RESULTS}/{{study}}/logs/predicted.log",
    threads: 2
    resources:
        mem_mb=8000,
    params:
        cmd=stage_cmd("predicted"),
    shell:
        "{params.cmd}"


rule pit:
    input:
        f"{RESULTS}/{{study}}/runs.parquet",
    output:
        f"{RESULTS}/{{study}}/pit.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/pit.log",
    threads: 2
    resources:
        mem_mb=8000,
    params:
        cmd=stage_cmd("pit"),
    shell:
        "{params.cmd}"


rule margins:
    input:
        f"{RESULTS}/{{study}}/runs.parquet",
        f"{RESULTS}/{{study}}/qualification.parquet",
    output:
        f"{RESULTS}/{{study}}/margins.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/margins.log",
    threads: 2
    resources:
        mem_mb=8000,
    params:
        cmd=stage_cmd("margins"),
    shell:
        "{params.cmd}"


rule level1:
    input:
        f"{RESULTS}/{{study}}/provenance.json",
    output:
        f"{RESULTS}/{{study}}/level1.json",
    log:
        f"{RESULTS}/{{study}}/logs/level1.log",
    threads: 1
    resources:
        mem_mb=1000,
    params:
        cmd=stage_cmd("level1"),
    shell:
        "{params.cmd}"


rule level2:
    input:
        f"{RESULTS}/{{study}}/provenance.json",
    output:
        f"{RESULTS}/{{study}}/level2.json",
    log:
        f"{RESULTS}/{{study}}/logs/level2.log",
    threads: 1
    resources:
        mem_mb=1000,
    params:
        cmd=stage_cmd("level2"),
    shell:
        "{params.cmd}"


rule calibration:
    input:
        f"{RESULTS}/{{study}}/pit.parquet",
    output:
        f"{RESULTS}/{{study}}/calibration.parquet",
        f"{RESULTS}/{{study}}/calibration.json",
    log:
        f"{RESULTS}/{{study}}/logs/calibration.log",
    threads: 1
    resources:
        mem_mb=2000,
    params:
        cmd=stage_cmd("calibration"),
    shell:
        "{params.cmd}"
