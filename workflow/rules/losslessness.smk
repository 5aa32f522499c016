rule batch_invariance:
    input:
        f"{RESULTS}/{{study}}/reference.seal.json",
    output:
        f"{RESULTS}/{{study}}/batch_invariance.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/batch_invariance.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        stage_cmd("batch_invariance")


rule qualification:
    input:
        f"{RESULTS}/{{study}}/reference.seal.json",
        f"{RESULTS}/{{study}}/runs.parquet",
    output:
        f"{RESULTS}/{{study}}/qualification.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/qualification.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        stage_cmd("qualification")


rule predict:
    input:
        f"{RESULTS}/{{study}}/reference.seal.json",
    output:
        f"{RESULTS}/{{study}}/prediction_seal.json",
    log:
        f"{RESULTS}/{{study}}/logs/predict.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        stage_cmd("predict")


rule predicted:
    input:
        f"{RESULTS}/{{study}}/prediction_seal.json",
    output:
        f"{RESULTS}/{{study}}/prediction.json",
    log:
        f"{RESULTS}/{{study}}/logs/predicted.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        stage_cmd("predicted")


rule pit:
    input:
        f"{RESULTS}/{{study}}/runs.parquet",
        f"{RESULTS}/{{study}}/rounds.parquet",
    output:
        f"{RESULTS}/{{study}}/pit.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/pit.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        stage_cmd("pit")


rule margins:
    input:
        f"{RESULTS}/{{study}}/runs.parquet",
        f"{RESULTS}/{{study}}/qualification.parquet",
    output:
        f"{RESULTS}/{{study}}/margins.parquet",
    log:
        f"{RESULTS}/{{study}}/logs/margins.log",
    conda:
        ENV
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        stage_cmd("margins")


rule level1:
    input:
        f"{RESULTS}/{{study}}/provenance.json",
    output:
        f"{RESULTS}/{{study}}/level1.json",
    log:
        f"{RESULTS}/{{study}}/logs/level1.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
    shell:
        stage_cmd("level1")


rule level2:
    input:
        f"{RESULTS}/{{study}}/provenance.json",
    output:
        f"{RESULTS}/{{study}}/level2.json",
    log:
        f"{RESULTS}/{{study}}/logs/level2.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
    shell:
        stage_cmd("level2")


rule calibration:
    input:
        f"{RESULTS}/{{study}}/pit.parquet",
    output:
        f"{RESULTS}/{{study}}/calibration.parquet",
        f"{RESULTS}/{{study}}/calibration.json",
    log:
        f"{RESULTS}/{{study}}/logs/calibration.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        stage_cmd("calibration")
