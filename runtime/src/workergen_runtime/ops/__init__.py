"""Operations: doctor, monitor, metrics, queue depths, provisioning and the HTTP front door."""
