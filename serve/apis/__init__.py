"""One module per Kafka API family; ``versions`` lists what is served."""
