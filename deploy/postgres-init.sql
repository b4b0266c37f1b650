-- Databases of the production engine (docker-compose first start). Schema: migrations/.
CREATE DATABASE rtgs_seq;
CREATE DATABASE rtgs_dc1;
CREATE DATABASE rtgs_dc2;
CREATE DATABASE rtgs_dc3;
